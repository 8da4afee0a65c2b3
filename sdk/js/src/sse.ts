/**
 * Server-Sent Events parser (internal): bytes as they arrive in, events out.
 *
 * The WHATWG event-stream format, as the Python SDK parses it: lines end with CRLF,
 * LF or CR (a CR at the end of one read may be the first half of a CRLF split across
 * reads); an empty line dispatches the event; `event:` names it (default `message`),
 * `data:` lines are joined with LF, an event without data is not dispatched; a line
 * starting with `:` is a comment (the service's heartbeat, counted in `comments`);
 * `id:` and `retry:` are ignored (an execution is not resumable). Lines are searched
 * only in the bytes just received, so a large event in many reads costs linear time.
 *
 * @module
 */

/** Largest event accepted (a result with its returned files, base64-encoded). */
export const MAX_EVENT_BYTES = 2 ** 31;

/** One dispatched event. */
export interface RawEvent {
  type: string;
  data: string;
}

/** An event over the size bound. */
export class EventTooLarge extends Error {}

const CR = 0x0d;
const LF = 0x0a;

export class SseParser {
  #line: Buffer[] = [];
  #lineLength = 0;
  #skipLf = false;
  #type = "";
  #data: string[] = [];
  #size = 0;
  readonly #max: number;
  /** Comment lines seen (heartbeats). */
  comments = 0;

  constructor(maxEventBytes: number = MAX_EVENT_BYTES) {
    this.#max = maxEventBytes;
  }

  /** Takes the next bytes of the stream; returns the events they complete. */
  feed(chunk: Uint8Array): RawEvent[] {
    const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const events: RawEvent[] = [];
    let start = this.#skipLf && buf[0] === LF ? 1 : 0;
    this.#skipLf = false;
    while (start < buf.length) {
      const end = lineEnd(buf, start);
      if (end < 0) {
        this.#keep(buf.subarray(start));
        break;
      }
      this.#keep(buf.subarray(start, end));
      const line = Buffer.concat(this.#line);
      this.#line = [];
      this.#lineLength = 0;
      if (buf[end] === CR) {
        if (end + 1 < buf.length) {
          start = buf[end + 1] === LF ? end + 2 : end + 1;
        } else {
          this.#skipLf = true;
          start = buf.length;
        }
      } else {
        start = end + 1;
      }
      const event = this.#take(line);
      if (event !== null) events.push(event);
    }
    return events;
  }

  #keep(piece: Buffer): void {
    if (piece.length === 0) return;
    // copied: the caller may reuse its buffer
    this.#line.push(Buffer.from(piece));
    this.#lineLength += piece.length;
    if (this.#lineLength + this.#size > this.#max) throw new EventTooLarge(`an event of more than ${this.#max} bytes`);
  }

  #take(raw: Buffer): RawEvent | null {
    if (raw.length === 0) {
      const type = this.#type || "message";
      const data = this.#data;
      this.#type = "";
      this.#data = [];
      this.#size = 0;
      return data.length === 0 ? null : { type, data: data.join("\n") };
    }
    const line = raw.toString("utf8");
    if (line.startsWith(":")) {
      this.comments++;
      return null;
    }
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") {
      this.#type = value;
    } else if (name === "data") {
      this.#data.push(value);
      this.#size += raw.length;
    }
    return null;
  }
}

function lineEnd(buf: Buffer, start: number): number {
  const lf = buf.indexOf(LF, start);
  const cr = buf.subarray(start, lf < 0 ? buf.length : lf).indexOf(CR);
  return cr >= 0 ? start + cr : lf;
}
