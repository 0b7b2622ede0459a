// Drives an agentloop AGUIApp with the real @ag-ui/client HttpAgent and prints every event whole.
//
//   node agui_events.mjs <url> '<plan JSON>'
//
// The plan is {"threadId": "...", "say": ["text", ...]}: one run per text, each after adding it
// as a user message. One JSON object goes to stdout: {"runs": [{"events": [...], "error"}],
// "messages": [...]}, each event as the client parsed it (CUSTOM events with their name and
// value), and the agent's messages as the client assembled them.
import { HttpAgent } from "@ag-ui/client";

const [url, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
const agent = new HttpAgent({ url, threadId: plan.threadId });
const runs = [];

for (const [index, text] of plan.say.entries()) {
  const seen = { events: [], error: null };
  agent.addMessage({ id: `user-${index + 1}`, role: "user", content: text });
  try {
    await agent.runAgent({}, {
      onEvent({ event }) {
        seen.events.push(event);
      },
      onRunErrorEvent({ event }) {
        seen.error = { message: event.message, code: event.code ?? null, metadata: event.metadata ?? null };
      },
    });
  } catch (error) {
    seen.error = seen.error ?? { message: String(error), code: "client", metadata: null };
  }
  runs.push(seen);
}

process.stdout.write(JSON.stringify({ runs, messages: agent.messages }));
