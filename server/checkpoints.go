package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brainrt/brain/session"
)

// Checkpointer is a [Store] that keeps a checkpoint of each session
// (package store's Store): the Manager has it checkpoint every session it
// hibernates, and wakes a session from its checkpoint and the events
// stored after it, instead of from every event.
type Checkpointer interface {
	ResumeFrom(ctx context.Context, id string) (*session.Checkpoint, []session.Event, session.Journal, error)
	Checkpoint(ctx context.Context, id string, opts *session.Options) error
	// KeepsCheckpoints reports whether Checkpoint writes any (a
	// clustered store keeps none): without, nothing is queued for it.
	KeepsCheckpoints() bool
}

// checkpointQueue bounds the hibernated sessions waiting for their
// checkpoint: past it a session is not checkpointed this time (its next
// wake reads its events; its next hibernation checkpoints it).
const checkpointQueue = 4096

// checkpointTimeout bounds one checkpoint: a read of the events stored
// since the last one and a write.
const checkpointTimeout = 30 * time.Second

// checkpoints writes the checkpoints of hibernated sessions one at a
// time, on a goroutine that runs while there are some to write: a
// checkpoint reads what a wake would, and many at once would take the
// store from the sessions being served.
type checkpoints struct {
	write func(ctx context.Context, id string) error
	log   *slog.Logger

	mu      sync.Mutex
	queue   []string
	running bool
	closed  bool
	ctx     context.Context // cancelled by drain
	cancel  context.CancelFunc
	done    chan struct{} // closed when the goroutine ends; nil when none runs
}

func newCheckpoints(write func(ctx context.Context, id string) error, log *slog.Logger) *checkpoints {
	ctx, cancel := context.WithCancel(context.Background())
	return &checkpoints{write: write, log: log, ctx: ctx, cancel: cancel}
}

// add queues session id's checkpoint.
func (c *checkpoints) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.queue) >= checkpointQueue {
		return
	}
	c.queue = append(c.queue, id)
	if !c.running {
		c.running, c.done = true, make(chan struct{})
		go c.run(c.done)
	}
}

func (c *checkpoints) run(done chan struct{}) {
	defer close(done)
	for {
		c.mu.Lock()
		if len(c.queue) == 0 || c.closed {
			c.running = false
			c.mu.Unlock()
			return
		}
		id := c.queue[0]
		c.queue = c.queue[1:]
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(c.ctx, checkpointTimeout)
		if err := c.write(ctx, id); err != nil && c.ctx.Err() == nil {
			c.log.Warn("session checkpoint not written: its next wake reads its events", slog.String("session", id), slog.String("error", err.Error()))
		}
		cancel()
	}
}

// stopWriters is how many checkpoints a stop writes at once.
const stopWriters = 2

// drain is the stop's: it checkpoints the sessions leaving memory, ids,
// after those queued, stopWriters at a time, until ctx ends; then it
// cancels those being written and waits for them. Nothing is queued
// after it. It returns how many were written and how many were left.
func (c *checkpoints) drain(ctx context.Context, ids []string) (written, left int) {
	c.mu.Lock()
	c.closed = true
	queue := append(c.queue, ids...)
	c.queue = nil
	done := c.done
	c.mu.Unlock()
	defer func() {
		c.cancel() // the hibernations' writer, if still writing its last
		if done != nil {
			<-done
		}
	}()
	var next, ok atomic.Int64
	var wg sync.WaitGroup
	for range stopWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(queue) {
					return
				}
				wctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
				err := c.write(wctx, queue[i])
				cancel()
				if err == nil {
					ok.Add(1)
				} else if ctx.Err() == nil {
					c.log.Warn("session checkpoint not written: its next wake reads its events", slog.String("session", queue[i]), slog.String("error", err.Error()))
				}
			}
		}()
	}
	wg.Wait()
	return int(ok.Load()), len(queue) - int(ok.Load())
}
