// One run of an agentloop AGUIApp through the real @ag-ui/client HttpAgent, checked client-side.
//
//   node agui_seams.mjs <url> '<user text>'
//
// Prints one JSON object: the event types in order, every tool call the client saw start and
// whether it ended (TOOL_CALL_END) and got its result (TOOL_CALL_RESULT), whether all reasoning
// came before the first text, the run's outcome or error, and the agent's final messages.
import { HttpAgent } from "@ag-ui/client";

const [url, text] = process.argv.slice(2);
const agent = new HttpAgent({ url, threadId: "seams" });
agent.addMessage({ id: "user-1", role: "user", content: text });

const types = [];
const calls = {};
let outcome = null;
let result = null;
let error = null;
try {
  await agent.runAgent(
    {},
    {
      onEvent({ event }) {
        types.push(event.type);
      },
      onToolCallStartEvent({ event }) {
        calls[event.toolCallId] = { name: event.toolCallName, ended: false, results: [] };
      },
      onToolCallEndEvent({ event }) {
        calls[event.toolCallId].ended = true;
      },
      onToolCallResultEvent({ event }) {
        calls[event.toolCallId]?.results.push({
          content: event.content,
          error: event.metadata?.agentloop?.error === true,
        });
      },
      onRunFinishedEvent(params) {
        outcome = params.outcome ?? null;
        result = params.result ?? params.event?.result ?? null;
      },
      onRunErrorEvent({ event }) {
        error = { message: event.message, code: event.code ?? null };
      },
    },
  );
} catch (caught) {
  error = error ?? { message: String(caught), code: "client" };
}

const reasoning = types.flatMap((type, index) => (type.startsWith("REASONING") ? [index] : []));
const firstText = types.indexOf("TEXT_MESSAGE_CONTENT");
const unfinished = Object.entries(calls)
  .filter(([, call]) => !call.ended || call.results.length !== 1)
  .map(([id]) => id);
process.stdout.write(
  JSON.stringify({
    types,
    calls,
    unfinished,
    reasoningFirst: reasoning.length > 0 && firstText >= 0 && Math.max(...reasoning) < firstText,
    outcome,
    result,
    error,
    messages: agent.messages,
  }),
);
