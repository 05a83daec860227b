package host

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/brainrt/brain/internal/abi"
)

// Instrumentation: how a guest is stopped at its deadline without wazero's
// termination checks (docs/RATIONALE.md, "Why are payloads instrumented
// instead of compiled with termination checks?").
//
// After its identity is verified, and before it is compiled, a payload is
// rewritten so that function entries, loop headers and bulk memory
// operations charge an inline fuel counter (a new mutable i32 global), and
// call the host import brain.tick when the fuel runs out. tick checks the
// call's context, traps if it is done, and returns the next allowance of
// fuel. A unit of fuel is bounded work whatever the payload's shape (a
// loop iteration, a call, at most instrPerUnit straight-line instructions,
// or bulkUnit bytes of a memory.copy or fill), so a guest that spins,
// recurses, runs huge functions or loops around host calls reaches Go
// after at most fuelPerTick units, and stops there within its deadline,
// while the common path stays native: a subtraction, a store, a compare
// and a not-taken branch. Because of this bound, the host's artifacts are
// tool.DeadlineBound: a kernel calls them on its own goroutine.
//
// The rewrite understands the instructions Go's wasm port emits (the
// MVP, sign extension, saturating conversions, bulk memory) and refuses a
// payload using any other (SIMD, atomics, exceptions, GC): such a payload
// fails its attach with a clear error instead of running unstoppable.

// tickImport is the host function an instrumented payload imports.
const tickImport = "tick"

// fuelPerTick is how many units of fuel a guest spends between two
// ticks. A tick costs about as much as a host call (tens of nanoseconds);
// 10,000 units take at least microseconds of guest work (the echo tool
// ticks less than once a call), and at most a few milliseconds
// (TestInstrumentationPrecision), so ticks cost well under 1% and a
// deadline is noticed within about a millisecond.
const fuelPerTick = 10_000

// vectorLimits bound the entries of each section that is a vector (by
// section id), like the limits of web engines: far above what a Go payload
// holds (about ten thousand functions), far below what exhausts memory.
var vectorLimits = map[byte]uint32{
	1: 1_000_000, 2: 100_000, 3: 1_000_000, 4: 100_000, 5: 100, 6: 1_000_000,
	7: 100_000, 9: 1_000_000, 10: 1_000_000, 11: 100_000, 13: 100_000,
}

// errNotInstrumentable marks a payload the rewrite does not understand.
var errNotInstrumentable = errors.New("cannot be instrumented")

// instrument returns the instrumented payload.
func instrument(wasm []byte) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil { // a bounds slip on hostile input is an error, not a crash
			out, err = nil, fmt.Errorf("%w: malformed module (%v)", errNotInstrumentable, p)
		}
	}()
	return instrumentModule(wasm)
}

func instrumentModule(wasm []byte) ([]byte, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:8], []byte("\x00asm\x01\x00\x00\x00")) {
		return nil, fmt.Errorf("%w: not a WebAssembly 1.0 binary module", errNotInstrumentable)
	}
	type section struct {
		id   byte
		body []byte
	}
	var secs []section
	for r := (reader{b: wasm[8:]}); !r.done(); {
		id := r.byte()
		n := r.u32()
		secs = append(secs, section{id, r.bytes(n)})
	}
	if len(secs) == 0 {
		return nil, fmt.Errorf("%w: empty module", errNotInstrumentable)
	}
	// wazero allocates every vector at the length a module declares before
	// reading its elements: a forged count would exhaust memory. Refuse
	// counts that the section's bytes cannot hold or that exceed what any
	// real module needs.
	for _, s := range secs {
		limit, ok := vectorLimits[s.id]
		if !ok {
			continue
		}
		n := (&reader{b: s.body}).u32()
		if n > limit || int64(n) > int64(len(s.body)) {
			return nil, fmt.Errorf("%w: section %d declares %d entries in %d bytes (at most %d)", errNotInstrumentable, s.id, n, len(s.body), limit)
		}
	}
	// First pass: counts that the rewrite needs.
	var numTypes, numFuncImports, numGlobals uint32
	for _, s := range secs {
		switch s.id {
		case 1:
			numTypes = (&reader{b: s.body}).u32()
		case 2:
			f, g, err := countImports(s.body)
			if err != nil {
				return nil, err
			}
			numFuncImports, numGlobals = f, numGlobals+g
		case 6:
			numGlobals += (&reader{b: s.body}).u32()
		}
	}
	ix := indices{shiftFrom: numFuncImports, tick: numFuncImports, fuel: numGlobals}
	var typeSec, funcSec []byte
	for _, s := range secs {
		switch s.id {
		case 1:
			typeSec = s.body
		case 3:
			funcSec = s.body
		}
	}
	params, err := funcParams(typeSec, funcSec)
	if err != nil {
		return nil, err
	}
	tickType := numTypes

	var out bytes.Buffer
	out.Write(wasm[:8])
	emit := func(id byte, body []byte) {
		out.WriteByte(id)
		out.Write(uleb(uint64(len(body))))
		out.Write(body)
	}
	has := map[byte]bool{}
	for _, s := range secs {
		has[s.id] = true
	}
	order := func(id byte) int { // the canonical order of known sections
		return map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}[id]
	}
	// emitMissing writes the sections the rewrite adds when the module has
	// none, just before the first section that must follow them.
	emitMissing := func(limit int) {
		if !has[1] && limit > order(1) {
			emit(1, prependCount(0, nil, []byte{0x60, 0, 1, 0x7f}))
			has[1] = true
		}
		if !has[2] && limit > order(2) {
			emit(2, tickImportEntry(0, tickType))
			has[2] = true
		}
		if !has[6] && limit > order(6) {
			emit(6, prependCount(0, nil, fuelGlobal()))
			has[6] = true
		}
	}
	for _, s := range secs {
		if s.id != 0 {
			emitMissing(order(s.id))
		}
		switch s.id {
		case 0: // custom
			name := (&reader{b: s.body}).name()
			if name == "name" {
				continue // function names are indexed by the old numbering
			}
			emit(0, s.body)
		case 1: // types: add () -> i32
			r := reader{b: s.body}
			n := r.u32()
			emit(1, prependCount(n, r.rest(), []byte{0x60, 0, 1, 0x7f}))
		case 2: // imports: add brain.tick
			r := reader{b: s.body}
			n := r.u32()
			emit(2, append(prependCount(n+1, r.rest(), nil), tickImportEntry(-1, tickType)...))
		case 6: // globals: rewrite init expressions, add the fuel counter
			body, err := rewriteGlobals(s.body, ix)
			if err != nil {
				return nil, err
			}
			emit(6, body)
		case 7:
			body, err := rewriteExports(s.body, ix)
			if err != nil {
				return nil, err
			}
			emit(7, body)
		case 8:
			r := reader{b: s.body}
			emit(8, uleb(uint64(ix.fn(r.u32()))))
		case 9:
			body, err := rewriteElems(s.body, ix)
			if err != nil {
				return nil, err
			}
			emit(9, body)
		case 10:
			body, err := rewriteCode(s.body, ix, params)
			if err != nil {
				return nil, err
			}
			emit(10, body)
		case 3, 4, 5, 11, 12:
			emit(s.id, s.body)
		default:
			return nil, fmt.Errorf("%w: unknown section %d", errNotInstrumentable, s.id)
		}
	}
	emitMissing(math.MaxInt)
	return out.Bytes(), nil
}

// indices maps the old function index space to the new one: the tick
// import goes after the other function imports, so defined functions move
// up by one; the fuel global goes after every other global.
type indices struct {
	shiftFrom, tick, fuel uint32
}

func (ix indices) fn(i uint32) uint32 {
	if i >= ix.shiftFrom {
		return i + 1
	}
	return i
}

func tickImportEntry(count int, typ uint32) []byte {
	var b []byte
	if count >= 0 {
		b = uleb(uint64(count + 1))
	}
	b = append(b, uleb(uint64(len(abi.ModuleBrain)))...)
	b = append(b, abi.ModuleBrain...)
	b = append(b, uleb(uint64(len(tickImport)))...)
	b = append(b, tickImport...)
	b = append(b, 0)
	return append(b, uleb(uint64(typ))...)
}

// fuelGlobal is (mut i32) initialised to fuelPerTick.
func fuelGlobal() []byte {
	return append(append([]byte{0x7f, 1, 0x41}, sleb(fuelPerTick)...), 0x0b)
}

func prependCount(n uint32, entries, extra []byte) []byte {
	b := uleb(uint64(n))
	if extra != nil {
		b = uleb(uint64(n + 1))
	}
	b = append(b, entries...)
	return append(b, extra...)
}

// countImports returns the number of function and global imports.
func countImports(body []byte) (funcs, globals uint32, err error) {
	r := reader{b: body}
	n := r.u32()
	for range n {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0: // func
			r.u32()
			funcs++
		case 1: // table
			r.byte()
			r.limits()
		case 2: // memory
			r.limits()
		case 3: // global
			r.byte()
			r.byte()
			globals++
		default:
			return 0, 0, fmt.Errorf("%w: import kind %#x", errNotInstrumentable, kind)
		}
	}
	return funcs, globals, nil
}

func rewriteGlobals(body []byte, ix indices) ([]byte, error) {
	r := reader{b: body}
	n := r.u32()
	w := uleb(uint64(n + 1))
	for range n {
		w = append(w, r.byte(), r.byte()) // valtype, mutability
		var err error
		if w, err = constExpr(&r, w, ix); err != nil {
			return nil, err
		}
	}
	if !r.done() {
		return nil, fmt.Errorf("%w: trailing bytes in the global section", errNotInstrumentable)
	}
	return append(w, fuelGlobal()...), nil
}

func rewriteExports(body []byte, ix indices) ([]byte, error) {
	r := reader{b: body}
	n := r.u32()
	w := uleb(uint64(n))
	for range n {
		name := r.name()
		w = append(w, uleb(uint64(len(name)))...)
		w = append(w, name...)
		kind := r.byte()
		idx := r.u32()
		if kind == 0 {
			idx = ix.fn(idx)
		}
		w = append(w, kind)
		w = append(w, uleb(uint64(idx))...)
	}
	return w, nil
}

func rewriteElems(body []byte, ix indices) ([]byte, error) {
	r := reader{b: body}
	n := r.u32()
	w := uleb(uint64(n))
	var err error
	for range n {
		flags := r.u32()
		w = append(w, uleb(uint64(flags))...)
		if flags > 7 {
			return nil, fmt.Errorf("%w: element segment flags %d", errNotInstrumentable, flags)
		}
		if flags == 2 || flags == 6 { // explicit table index
			w = append(w, uleb(uint64(r.u32()))...)
		}
		if flags&1 == 0 { // active: an offset expression
			if w, err = constExpr(&r, w, ix); err != nil {
				return nil, err
			}
		}
		if flags&3 != 0 { // elemkind or reftype
			w = append(w, r.byte())
		}
		count := r.u32()
		w = append(w, uleb(uint64(count))...)
		for range count {
			if flags&4 == 0 { // function indices
				w = append(w, uleb(uint64(ix.fn(r.u32())))...)
			} else if w, err = constExpr(&r, w, ix); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// constExpr copies a constant expression up to its end, moving function
// references.
func constExpr(r *reader, w []byte, ix indices) ([]byte, error) {
	for {
		op := r.byte()
		w = append(w, op)
		switch op {
		case 0x0b:
			return w, nil
		case 0x41:
			w = append(w, sleb(r.s64())...)
		case 0x42:
			w = append(w, sleb(r.s64())...)
		case 0x43:
			w = append(w, r.bytes(4)...)
		case 0x44:
			w = append(w, r.bytes(8)...)
		case 0x23:
			w = append(w, uleb(uint64(r.u32()))...)
		case 0xd0:
			w = append(w, r.byte())
		case 0xd2:
			w = append(w, uleb(uint64(ix.fn(r.u32())))...)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant expressions
		default:
			return nil, fmt.Errorf("%w: opcode %#x in a constant expression", errNotInstrumentable, op)
		}
	}
}

// Checks. Static checks charge the fuel counter a fixed cost; every bulk
// memory or table instruction charges one unit per 2^bulkShift elements of
// its length, read at run time. When the fuel is spent, the check calls
// tick:
//
//	global.get $fuel; i32.const cost; i32.sub; local.tee $t; global.set $fuel
//	local.get $t; i32.const 0; i32.le_s
//	if; call $tick; global.set $fuel; end
//
// $t is a scratch local the rewrite adds to every function.
//
// Static checks go where every backward jump and every call meets one
// (planChecks): at function entries, at loop headers, and — for the
// dispatch loop Go's wasm port wraps around every function, whose header
// nearly every jump of the function passes — before the branches to it
// that do not provably land further down. All other control flow goes
// forward, so from a check on a function runs at most its length (plus a
// jump table per forward jump) before it meets the next one. A check
// costs 1 plus two units per instrPerUnit instructions of its function:
// a unit of fuel is a loop iteration, a call, or at most instrPerUnit
// instructions, whatever the payload's shape. On the echo tool this is
// about 560 checks a call where a check at every loop header would be
// about 1,280.
//
// A function's entry check is left out when its body reaches a checked
// loop header through straight-line code (no branch, no call): that
// check comes first on every path.
const (
	instrPerUnit = 256
	// bulkShift: a unit per 1 KiB (bytes or table elements) of a bulk
	// operation, which takes tens of nanoseconds.
	bulkShift = 10
)

func staticCheck(ix indices, t uint32, cost uint64) []byte {
	cost = min(cost, 1<<30)
	b := append([]byte{0x23}, uleb(uint64(ix.fuel))...)
	b = append(b, 0x41)
	b = append(b, sleb(int64(cost))...)
	b = append(b, 0x6b)
	return appendCheckTail(b, ix, t)
}

// dynamicCheck charges the length on top of the stack, leaving it there.
func dynamicCheck(ix indices, t uint32) []byte {
	b := append([]byte{0x22}, uleb(uint64(t))...) // local.tee $t
	b = append(b, 0x23)
	b = append(b, uleb(uint64(ix.fuel))...)
	b = append(b, 0x20)
	b = append(b, uleb(uint64(t))...)
	b = append(b, 0x41, bulkShift, 0x76, 0x6b) // i32.const; i32.shr_u; i32.sub
	return appendCheckTail(b, ix, t)
}

// appendCheckTail stores the new fuel and calls tick when it is spent.
func appendCheckTail(b []byte, ix indices, t uint32) []byte {
	g, l := uleb(uint64(ix.fuel)), uleb(uint64(t))
	b = append(b, 0x22)
	b = append(b, l...)
	b = append(b, 0x24)
	b = append(b, g...)
	b = append(b, 0x20)
	b = append(b, l...)
	b = append(b, 0x41, 0, 0x4c, 0x04, 0x40, 0x10) // i32.const 0; i32.le_s; if; call
	b = append(b, uleb(uint64(ix.tick))...)
	b = append(b, 0x24)
	b = append(b, g...)
	return append(b, 0x0b)
}

// funcParams returns the number of parameters of each defined function,
// from the type and function sections.
func funcParams(types, funcs []byte) ([]uint32, error) {
	if len(funcs) == 0 {
		return nil, nil
	}
	var params []uint32
	r := reader{b: types}
	for range r.u32() {
		if form := r.byte(); form != 0x60 {
			return nil, fmt.Errorf("%w: type form %#x", errNotInstrumentable, form)
		}
		n := r.u32()
		r.bytes(n)
		r.bytes(r.u32())
		params = append(params, n)
	}
	r = reader{b: funcs}
	n := r.u32()
	out := make([]uint32, 0, n)
	for range n {
		t := r.u32()
		if t >= uint32(len(params)) {
			return nil, fmt.Errorf("%w: function type %d out of range", errNotInstrumentable, t)
		}
		out = append(out, params[t])
	}
	return out, nil
}

func rewriteCode(body []byte, ix indices, params []uint32) ([]byte, error) {
	r := reader{b: body}
	n := r.u32()
	if n != uint32(len(params)) {
		return nil, fmt.Errorf("%w: %d function bodies for %d functions", errNotInstrumentable, n, len(params))
	}
	w := uleb(uint64(n))
	for i := range n {
		size := r.u32()
		fb := reader{b: r.bytes(size)}
		groups := fb.u32()
		locals := uint64(params[i])
		var decl []byte
		for range groups {
			c := fb.u32()
			locals += uint64(c)
			decl = append(decl, uleb(uint64(c))...)
			decl = append(decl, fb.byte())
		}
		if locals >= 50_000 { // wazero's limit; $t must fit too
			return nil, fmt.Errorf("%w: function %d has %d locals", errNotInstrumentable, i, locals)
		}
		t := uint32(locals)
		f := uleb(uint64(groups + 1))
		f = append(f, decl...)
		f = append(f, 1, 0x7f) // $t: one i32
		var err error
		if f, err = rewriteBody(&fb, f, ix, t); err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		w = append(w, uleb(uint64(len(f)))...)
		w = append(w, f...)
	}
	return w, nil
}

// inst is one decoded instruction of a function body.
type inst struct {
	op      byte
	from    int      // its bytes: code[from:to]
	to      int      //
	imm     int64    // i32.const's value; local.get/set's index; br, br_if's depth
	targets []uint32 // br_table's depths, the default last
}

// rewriteBody copies one function's instructions, moving function indices
// and inserting the checks.
func rewriteBody(r *reader, w []byte, ix indices, t uint32) ([]byte, error) {
	code := r.rest()
	insts, err := decodeBody(code)
	if err != nil {
		return nil, err
	}
	plan := planChecks(insts)
	total := uint64(len(insts))
	cost := 1 + 2*total/instrPerUnit // the work one check may cover (see above)
	if plan.entry {
		w = append(w, staticCheck(ix, t, cost)...)
	}
	for i, in := range insts {
		if plan.before[i] {
			w = append(w, staticCheck(ix, t, cost)...)
		}
		b := code[in.from:in.to]
		switch {
		case in.op == 0x10 || in.op == 0x12 || in.op == 0xd2: // call, return_call, ref.func
			w = append(w, in.op)
			w = append(w, uleb(uint64(ix.fn((&reader{b: b[1:]}).u32())))...)
		case in.op == 0xfc && isBulk(b):
			w = append(w, dynamicCheck(ix, t)...)
			w = append(w, b...)
		default:
			w = append(w, b...)
		}
		if plan.header[i] {
			w = append(w, staticCheck(ix, t, cost)...)
		}
	}
	return w, nil
}

// checkPlan says where a function's static checks go: at its entry,
// after a loop header, before a branch.
type checkPlan struct {
	entry          bool
	header, before []bool
}

// dispatch is a loop of the shape Go's wasm port gives every function
// with more than one basic block:
//
//	loop; block × m; local.get $pc; br_table ...; end (block 0) ...
//
// where every target of the br_table is one of the m blocks, so that the
// loop header jumps on at once to the end of block targets[$pc]: code
// past it. Go jumps from one basic block to another with
// `i32.const j; local.set $pc; br $loop`; when block targets[j] ends after
// the current position, that jump goes forward, and needs no check.
type dispatch struct {
	pc      int64
	targets []uint32
	segment int // the label whose block ended last, -1 before any: where the code being read lands
}

type frame struct {
	d     *dispatch // for a dispatch loop
	owner *dispatch // for one of its blocks
	label int       // that block's label at the br_table
}

// planChecks places the checks so that every backward jump meets one:
// the header of every loop except a dispatch loop's, and every branch to
// a dispatch loop except a forward jump of the shape above. Every other
// transfer of control goes forward, or into a function (whose entry has a
// check, unless its body reaches a checked loop header in straight line).
func planChecks(insts []inst) checkPlan {
	plan := checkPlan{entry: true, header: make([]bool, len(insts)), before: make([]bool, len(insts))}
	stack := []frame{{}} // the function's own block
	straight := true     // no branch or call yet
	target := func(depth int64) *frame {
		if depth < 0 || depth >= int64(len(stack)) {
			return nil
		}
		return &stack[len(stack)-1-int(depth)]
	}
	for i := 0; i < len(insts); i++ {
		in := insts[i]
		switch in.op {
		case 0x02, 0x04: // block, if
			stack = append(stack, frame{})
		case 0x03: // loop
			d, m := recogniseDispatch(insts, i)
			stack = append(stack, frame{d: d})
			if d == nil {
				plan.header[i] = true
				if straight {
					plan.entry = false // this header comes first on every path
				}
				break
			}
			for k := range m { // its blocks: the k-th opened is label m-1-k
				stack = append(stack, frame{owner: d, label: m - 1 - k})
			}
			i += m // the blocks are read; the br_table jumps forward
		case 0x0b: // end
			if f := stack[len(stack)-1]; f.owner != nil {
				f.owner.segment = f.label
			}
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
		case 0x0c: // br
			if f := target(in.imm); f != nil && f.d != nil && !forwardJump(insts, i, f.d) {
				plan.before[i] = true
			}
		case 0x0d: // br_if
			if f := target(in.imm); f != nil && f.d != nil {
				plan.before[i] = true
			}
		case 0x0e: // br_table
			for _, depth := range in.targets {
				if f := target(int64(depth)); f != nil && f.d != nil {
					plan.before[i] = true
				}
			}
		}
		switch in.op {
		case 0x04, 0x05, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13:
			straight = false
		}
	}
	return plan
}

// recogniseDispatch reports whether the loop at insts[i] is a dispatch
// loop, and its number of blocks.
func recogniseDispatch(insts []inst, i int) (*dispatch, int) {
	m := 0
	for i+1+m < len(insts) && insts[i+1+m].op == 0x02 {
		m++
	}
	j := i + 1 + m
	if m == 0 || j+1 >= len(insts) || insts[j].op != 0x20 || insts[j+1].op != 0x0e {
		return nil, 0
	}
	for _, depth := range insts[j+1].targets {
		if depth >= uint32(m) {
			return nil, 0
		}
	}
	return &dispatch{pc: insts[j].imm, targets: insts[j+1].targets, segment: -1}, m
}

// forwardJump reports whether the br at insts[i] to dispatch loop d is
// `i32.const j; local.set $pc; br` landing in a block that ends after the
// current position.
func forwardJump(insts []inst, i int, d *dispatch) bool {
	if i < 2 || insts[i-2].op != 0x41 || insts[i-1].op != 0x21 || insts[i-1].imm != d.pc || d.segment < 0 {
		return false
	}
	j := uint64(uint32(insts[i-2].imm)) // br_table reads it as unsigned
	last := uint64(len(d.targets) - 1)
	return int(d.targets[min(j, last)]) > d.segment
}

// isBulk reports whether a 0xfc instruction takes a length operand on top
// of the stack: memory.init, memory.copy, memory.fill, table.init,
// table.copy, table.fill.
func isBulk(instr []byte) bool {
	switch sub := (&reader{b: instr[1:]}).u32(); sub {
	case 8, 10, 11, 12, 14, 17:
		return true
	}
	return false
}

// decodeBody decodes a function's instructions.
func decodeBody(code []byte) ([]inst, error) {
	r := reader{b: code}
	var out []inst
	for !r.done() {
		in := inst{from: r.pos}
		op := r.byte()
		in.op = op
		switch {
		case op == 0x10 || op == 0x12 || op == 0xd2: // call, return_call, ref.func
			r.u32()
		case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
			r.blockType()
		case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1,
			op >= 0x45 && op <= 0xc4: // no immediates
		case op == 0x0c || op == 0x0d: // br, br_if
			in.imm = int64(r.u32())
		case op == 0x0e: // br_table
			n := uint64(r.u32()) + 1 // the default too
			in.targets = make([]uint32, 0, min(n, uint64(len(code)-r.pos)))
			for range n {
				in.targets = append(in.targets, r.u32())
			}
		case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select t*
			for range r.u32() {
				r.byte()
			}
		case op >= 0x20 && op <= 0x26: // locals, globals, table.get/set
			in.imm = int64(r.u32())
		case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
			if align := r.u32(); align&0x40 != 0 {
				r.u32() // memory index
			}
			r.u64()
		case op == 0x3f || op == 0x40: // memory.size, memory.grow
			r.u32()
		case op == 0x41:
			in.imm = r.s64()
		case op == 0x42:
			r.s64()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0xd0:
			r.byte()
		case op == 0xfc:
			switch sub := r.u32(); {
			case sub <= 7: // saturating truncation
			case sub == 8 || sub == 12 || sub == 10 || sub == 14: // memory.init, table.init, memory.copy, table.copy
				r.u32()
				r.u32()
			case sub == 9 || sub == 11 || sub == 13 || sub == 15 || sub == 16 || sub == 17:
				r.u32()
			default:
				return nil, fmt.Errorf("%w: instruction 0xfc %d", errNotInstrumentable, sub)
			}
		default:
			return nil, fmt.Errorf("%w: instruction %#x at byte %d (only the instructions Go's wasm port emits are supported)", errNotInstrumentable, op, in.from)
		}
		in.to = r.pos
		out = append(out, in)
	}
	return out, nil
}

// reader decodes a WebAssembly binary; it panics past the end, which
// instrument turns into an error.
type reader struct {
	b   []byte
	pos int
}

func (r *reader) done() bool { return r.pos >= len(r.b) }

func (r *reader) byte() byte {
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n uint32) []byte {
	if uint64(n) > uint64(len(r.b)-r.pos) {
		panic("length past the end")
	}
	b := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b
}

func (r *reader) rest() []byte { return r.b[r.pos:] }

func (r *reader) u64() uint64 {
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 {
		panic("bad LEB128")
	}
	r.pos += n
	return v
}

func (r *reader) u32() uint32 {
	v := r.u64()
	if v > math.MaxUint32 {
		panic("u32 out of range")
	}
	return uint32(v)
}

func (r *reader) s64() int64 {
	var v int64
	var shift uint
	for {
		c := r.byte()
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
		if shift >= 70 {
			panic("bad signed LEB128")
		}
	}
}

func (r *reader) name() string { return string(r.bytes(r.u32())) }

func (r *reader) limits() {
	flags := r.byte()
	r.u64()
	if flags&1 != 0 {
		r.u64()
	}
}

// blockType skips a block type: empty, a value type, or a type index (s33).
func (r *reader) blockType() {
	switch r.b[r.pos] {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.pos++
	default:
		r.s64()
	}
}

func uleb(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
