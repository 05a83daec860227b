import { BrainError } from "./errors.js";

/**
 * Feed is an async iterator over pushed values with a bounded buffer: a
 * consumer that falls more than `max` values behind gets an error
 * (`too_large`) instead of growing memory without limit.
 */
export class Feed<T> implements AsyncIterableIterator<T> {
  private readonly buf: T[] = [];
  private readonly waiters: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void }[] = [];
  private ended = false;
  private failure: unknown;
  private readonly onEnd: () => void;
  private readonly max: number;

  constructor(max: number, onEnd: () => void, signal?: AbortSignal) {
    this.max = max;
    this.onEnd = onEnd;
    if (signal !== undefined) {
      if (signal.aborted) {
        this.end();
      } else {
        signal.addEventListener("abort", () => this.end(), { once: true });
      }
    }
  }

  /** push hands a value to a waiting consumer or buffers it. */
  push(v: T): void {
    if (this.ended) {
      return;
    }
    const w = this.waiters.shift();
    if (w !== undefined) {
      w.resolve({ value: v, done: false });
      return;
    }
    if (this.buf.length >= this.max) {
      this.fail(new BrainError("too_large", `the consumer fell more than ${this.max} values behind; iterate faster or raise maxBuffered`));
      return;
    }
    this.buf.push(v);
  }

  /** end finishes the iteration after the buffered values. */
  end(): void {
    if (this.ended) {
      return;
    }
    this.ended = true;
    this.onEnd();
    for (const w of this.waiters.splice(0)) {
      w.resolve({ value: undefined, done: true });
    }
  }

  /** fail ends the iteration with an error, dropping what is buffered. */
  fail(err: unknown): void {
    if (this.ended) {
      return;
    }
    this.failure = err;
    this.buf.length = 0;
    this.ended = true;
    this.onEnd();
    for (const w of this.waiters.splice(0)) {
      w.reject(err);
    }
  }

  next(): Promise<IteratorResult<T>> {
    if (this.buf.length > 0) {
      return Promise.resolve({ value: this.buf.shift() as T, done: false });
    }
    if (this.failure !== undefined) {
      const err = this.failure;
      this.failure = undefined;
      return Promise.reject(err);
    }
    if (this.ended) {
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  return(): Promise<IteratorResult<T>> {
    this.buf.length = 0;
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }
}
