// Server-sent events (text/event-stream) read from a fetch body, for streams an
// EventSource can't open: a POST that answers with a stream, and a resume that must
// send the session's CSRF header. Parsed as the HTML standard says
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
// lines end in CRLF, LF or CR; a blank line dispatches; ":" starts a comment (the
// server's keepalives); several data lines join with "\n"; an unterminated event at the
// end of the stream is dropped.

const LF = "\n";
const CR = "\r";

/**
 * A parser fed decoded text in chunks split anywhere (inside a line, between CR and
 * LF). `onEvent({id, event, data})` is called once per dispatched event: `event` is
 * "message" when the event named none; `id` is the last id seen so far ("" if none).
 */
export function createSseParser(onEvent) {
  let buffer = "";
  let data = [];
  let eventType = "";
  let lastEventId = "";
  let started = false;
  let skipLF = false; // the previous chunk ended in CR: a LF first in the next one is its pair

  function dispatch() {
    // An event without data lines dispatches nothing and forgets its type.
    if (data.length) onEvent({ id: lastEventId, event: eventType || "message", data: data.join(LF) });
    data = [];
    eventType = "";
  }

  function field(line) {
    if (line === "") return dispatch();
    if (line.startsWith(":")) return; // a comment: keepalive
    const colon = line.indexOf(":");
    const name = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "data") data.push(value);
    else if (name === "event") eventType = value;
    else if (name === "id" && !value.includes("\0")) lastEventId = value;
    // "retry" and unknown fields are ignored: this reader reconnects on its own terms.
  }

  function push(chunk) {
    let text = chunk;
    if (!text) return;
    if (!started) {
      started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (skipLF) {
      skipLF = false;
      if (text.startsWith(LF)) text = text.slice(1);
    }
    buffer += text;
    let start = 0;
    for (let i = 0; i < buffer.length; i += 1) {
      const c = buffer[i];
      if (c !== LF && c !== CR) continue;
      field(buffer.slice(start, i));
      if (c === CR) {
        if (i + 1 === buffer.length) skipLF = true;
        else if (buffer[i + 1] === LF) i += 1;
      }
      start = i + 1;
    }
    buffer = buffer.slice(start);
  }

  return {
    push,
    /** The id of the last event seen (the value a resume sends as Last-Event-ID). */
    get lastEventId() {
      return lastEventId;
    },
  };
}

/**
 * Read a fetch Response body (a ReadableStream of bytes) as SSE to its end, calling
 * `onEvent` for each event. Resolves when the server closes the stream; rejects when
 * the connection drops or the read is aborted.
 */
export async function readSse(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder(); // {stream: true} keeps a character split across chunks whole
  const parser = createSseParser(onEvent);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(decoder.decode(value, { stream: true }));
    }
    parser.push(decoder.decode());
  } finally {
    reader.releaseLock();
  }
}
