// Drives an agentloop AGUIApp with the real @ag-ui/client HttpAgent and prints what it saw.
//
//   node agui_run.mjs <url> '<plan JSON>'
//
// The plan is {"threadId": "...", "steps": [...]}; a step is {"say": "text"} (add a user message
// and run) or {"resume": {"approved": true, ...}} (run again answering every pending interrupt
// with that payload; {"cancel": true} answers with status "cancelled"); a step with
// {"abortOn": "EVENT_TYPE"} calls agent.abortRun() when that event arrives (the user stops the
// chat, the client keeping what it had seen); {"wait": "/a/file"} waits
// until that file exists (another process acts meanwhile, as an operator would). One JSON object goes to
// stdout: each run's event types, outcome, interrupts, error and the messages after it, and the
// agent's final messages.
import { existsSync } from "node:fs";
import { HttpAgent } from "@ag-ui/client";

const [url, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
const agent = new HttpAgent({ url, threadId: plan.threadId });
const runs = [];
let counter = 0;

for (const step of plan.steps) {
  if (step.wait !== undefined) {
    while (!existsSync(step.wait)) await new Promise((resolve) => setTimeout(resolve, 20));
    continue;
  }
  const seen = { events: [], outcome: null, interrupts: [], error: null, results: [] };
  const parameters = {};
  if (step.say !== undefined) {
    counter += 1;
    agent.addMessage({ id: `user-${counter}`, role: "user", content: step.say });
  } else if (step.resume !== undefined) {
    parameters.resume = agent.pendingInterrupts.map((interrupt) =>
      step.resume.cancel
        ? { interruptId: interrupt.id, status: "cancelled" }
        : { interruptId: interrupt.id, status: "resolved", payload: step.resume },
    );
  }
  try {
    await agent.runAgent(parameters, {
      onEvent({ event }) {
        seen.events.push(event.type);
        if (event.type === step.abortOn) agent.abortRun();
      },
      onToolCallResultEvent({ event }) {
        seen.results.push({ toolCallId: event.toolCallId, content: event.content, metadata: event.metadata ?? null });
      },
      onRunFinishedEvent(params) {
        seen.outcome = params.outcome;
        seen.interrupts = params.interrupts ?? [];
      },
      onRunErrorEvent({ event }) {
        seen.error = { message: event.message, code: event.code ?? null, metadata: event.metadata ?? null };
      },
    });
  } catch (error) {
    seen.error = seen.error ?? { message: String(error), code: "client", metadata: null };
  }
  seen.messages = structuredClone(agent.messages);
  runs.push(seen);
}

process.stdout.write(JSON.stringify({ runs, messages: agent.messages }));
