// One message to an agentloop VercelAIApp through the `ai` package's own chat, checked client-side.
//
//   node vercel_seams.mjs '{"url": "...", "send": "text"}'
//
// The chat is the package's AbstractChat over its DefaultChatTransport (every chunk checked
// against uiMessageChunkSchema, assembled by processUIMessageStream). Prints one JSON object:
// the assistant message's parts, the tool calls left without an output (a state other than
// output-available / output-error / output-denied), whether every reasoning part comes before
// the first text part, and the chat's status and errors.
import { AbstractChat, DefaultChatTransport, isToolUIPart } from "ai";

class State {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

class Chat extends AbstractChat {
  constructor(init) {
    const state = new State();
    super({ ...init, state });
    this.seen = state;
  }
}

const scenario = JSON.parse(process.argv[2]);
const errors = [];
const chat = new Chat({
  id: "seams",
  transport: new DefaultChatTransport({ api: scenario.url }),
  onError: (error) => errors.push(error.message),
});
await chat.sendMessage({ text: scenario.send });
for (let i = 0; i < 3000 && !["ready", "error"].includes(chat.status); i++) {
  await new Promise((resolve) => setTimeout(resolve, 5));
}

const last = chat.seen.messages.filter((m) => m.role === "assistant").at(-1);
const parts = (last?.parts ?? []).filter((p) => p.type !== "step-start");
const ended = new Set(["output-available", "output-error", "output-denied"]);
const unfinished = parts.filter((p) => isToolUIPart(p) && !ended.has(p.state)).map((p) => p.toolCallId);
const kinds = parts.map((p) => p.type);
const reasoning = kinds.flatMap((kind, index) => (kind === "reasoning" ? [index] : []));
const firstText = kinds.indexOf("text");
console.log(
  JSON.stringify({
    parts,
    unfinished,
    reasoningFirst: reasoning.length > 0 && firstText >= 0 && Math.max(...reasoning) < firstText,
    status: chat.status,
    errors,
  }),
);
