import { describe, expect, it } from "vitest";
import { createSseParser, readSse } from "./sse.js";
import { controlledStream, streamOf } from "./test-utils.js";

function parse(chunks) {
  const events = [];
  const parser = createSseParser((e) => events.push(e));
  for (const chunk of chunks) parser.push(chunk);
  return { events, parser };
}

const STREAM = 'id: 1\nevent: turn\ndata: {"a":1}\n\nid: 2\nevent: text\ndata: {"text":"hé"}\n\n';
const EXPECTED = [
  { id: "1", event: "turn", data: '{"a":1}' },
  { id: "2", event: "text", data: '{"text":"hé"}' },
];

describe("createSseParser", () => {
  it("reads events with their id, name and data", () => {
    expect(parse([STREAM]).events).toEqual(EXPECTED);
  });

  it("reads the same events whatever the chunk boundaries", () => {
    for (let size = 1; size <= STREAM.length; size += 1) {
      const chunks = [];
      for (let i = 0; i < STREAM.length; i += size) chunks.push(STREAM.slice(i, i + size));
      expect(parse(chunks).events, `chunks of ${size}`).toEqual(EXPECTED);
    }
  });

  it.each([
    ["CRLF", "\r\n"],
    ["CR", "\r"],
    ["LF", "\n"],
  ])("takes %s line endings, even split between chunks", (_, eol) => {
    const text = STREAM.replaceAll("\n", eol);
    expect(parse([text]).events).toEqual(EXPECTED);
    const chars = [...text];
    expect(parse(chars).events).toEqual(EXPECTED);
  });

  it("does not read a CRLF split across chunks as two line ends (no empty event, no blank line)", () => {
    const { events } = parse(["data: a\r", "\ndata: b\r", "\n\r", "\n"]);
    expect(events).toEqual([{ id: "", event: "message", data: "a\nb" }]);
  });

  it("joins several data lines with newlines and keeps an empty one", () => {
    const { events } = parse(["data: one\ndata:\ndata:  two\n\n"]);
    // Only the one space after the colon is the separator.
    expect(events[0].data).toBe("one\n\n two");
  });

  it("skips comments and keepalives, even between an event's lines", () => {
    const { events } = parse([": keepalive\n\n", "id: 3\n: hi\nevent: text\n:\ndata: x\n\n", ":keepalive\n\n"]);
    expect(events).toEqual([{ id: "3", event: "text", data: "x" }]);
  });

  it("names an event without an event field 'message' and forgets a type with no data", () => {
    const { events } = parse(["event: lonely\n\n", "data: x\n\n"]);
    expect(events).toEqual([{ id: "", event: "message", data: "x" }]);
  });

  it("keeps the last id for later events and ignores an id holding NUL", () => {
    const { events, parser } = parse(["id: 7\ndata: a\n\n", "data: b\n\n", "id: 8\0\ndata: c\n\n"]);
    expect(events.map((e) => e.id)).toEqual(["7", "7", "7"]);
    expect(parser.lastEventId).toBe("7");
  });

  it("reads a field without a colon as that field with an empty value, and ignores unknown fields", () => {
    const { events } = parse(["data\nretry: 10\nfoo: bar\n\n"]);
    expect(events).toEqual([{ id: "", event: "message", data: "" }]);
  });

  it("drops a leading byte order mark", () => {
    expect(parse(["\uFEFFdata: x\n\n"]).events[0].data).toBe("x");
  });

  it("dispatches nothing for an event the stream ends in the middle of", () => {
    expect(parse(["data: complete\n\ndata: cut off\n"]).events.map((e) => e.data)).toEqual(["complete"]);
  });
});

describe("readSse", () => {
  it("decodes a body of bytes, a character split across chunks included", async () => {
    const bytes = new TextEncoder().encode(STREAM);
    const split = STREAM.indexOf("é") + 1; // inside the two bytes of é
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(bytes.slice(0, split));
        c.enqueue(bytes.slice(split));
        c.close();
      },
    });
    const events = [];
    await readSse(stream, (e) => events.push(e));
    expect(events).toEqual(EXPECTED);
  });

  it("calls back each event as it arrives, before the stream ends", async () => {
    const body = controlledStream();
    const events = [];
    const done = readSse(body.stream, (e) => events.push(e));
    body.push("data: first\n\n");
    await new Promise((r) => setTimeout(r, 0));
    expect(events.map((e) => e.data)).toEqual(["first"]);
    body.push("data: second\n\n");
    body.close();
    await done;
    expect(events.map((e) => e.data)).toEqual(["first", "second"]);
  });

  it("rejects when the connection drops, after the events that came", async () => {
    const body = controlledStream();
    const events = [];
    const done = readSse(body.stream, (e) => events.push(e));
    body.push("data: first\n\n");
    await new Promise((r) => setTimeout(r, 0));
    body.fail();
    await expect(done).rejects.toThrow("network error");
    expect(events).toHaveLength(1);
  });

  it("reads an empty body as no events", async () => {
    const events = [];
    await readSse(streamOf([]), (e) => events.push(e));
    expect(events).toEqual([]);
  });
});
