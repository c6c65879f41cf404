import protobuf from "protobufjs/light.js";

/**
 * The fields of TensorFlow's Event and Summary protos (tensorflow/core/util/event.proto,
 * tensorflow/core/framework/summary.proto) that scalar summaries use, as a protobufjs
 * JSON descriptor. Field numbers are TensorFlow's; TensorBoard skips the fields left out.
 */
const DESCRIPTOR = {
  nested: {
    tensorflow: {
      nested: {
        Event: {
          oneofs: { what: { oneof: ["file_version", "summary"] } },
          fields: {
            wall_time: { type: "double", id: 1 },
            step: { type: "int64", id: 2 },
            file_version: { type: "string", id: 3 },
            summary: { type: "Summary", id: 5 },
          },
        },
        Summary: {
          fields: { value: { rule: "repeated", type: "Value", id: 1 } },
          nested: {
            Value: {
              oneofs: { value: { oneof: ["simple_value"] } },
              fields: {
                tag: { type: "string", id: 1 },
                simple_value: { type: "float", id: 2 },
              },
            },
          },
        },
      },
    },
  },
};

const EventType = protobuf.Root.fromJSON(DESCRIPTOR).lookupType("tensorflow.Event");

/** The file_version of the first event of every file: TensorBoard reads version 2 files. */
export const FILE_VERSION = "brain.Event:2";

/** One event: either the file_version header or scalar values (tag -> value) at a step. */
export interface ScalarEvent {
  /** Seconds since the Unix epoch. */
  wallTime: number;
  step: number;
  fileVersion?: string;
  scalars?: { tag: string; value: number }[];
}

export function encodeEvent(e: ScalarEvent): Uint8Array {
  const message = EventType.fromObject({
    wall_time: e.wallTime,
    step: e.step,
    ...(e.fileVersion !== undefined ? { file_version: e.fileVersion } : {}),
    ...(e.scalars ? { summary: { value: e.scalars.map((s) => ({ tag: s.tag, simple_value: s.value })) } } : {}),
  });
  return EventType.encode(message).finish();
}

interface DecodedEvent {
  wall_time?: number;
  step?: number;
  file_version?: string;
  summary?: { value?: { tag?: string; simple_value?: number }[] };
}

/** Decodes an event's bytes (throws protobufjs's error on malformed bytes). */
export function decodeEvent(bytes: Uint8Array): ScalarEvent {
  const o = EventType.toObject(EventType.decode(bytes), { longs: Number }) as DecodedEvent;
  return {
    wallTime: o.wall_time ?? 0,
    step: o.step ?? 0,
    ...(o.file_version !== undefined ? { fileVersion: o.file_version } : {}),
    ...(o.summary ? { scalars: (o.summary.value ?? []).map((v) => ({ tag: v.tag ?? "", value: v.simple_value ?? 0 })) } : {}),
  };
}
