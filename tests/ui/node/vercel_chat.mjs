// A Vercel AI SDK chat client, as a browser's useChat runs it, driven by a JSON scenario.
//
// It is the `ai` package's own AbstractChat over its DefaultChatTransport: every chunk the server
// sends is checked against the package's uiMessageChunkSchema and assembled into UIMessages by
// its processUIMessageStream, and decisions go back with addToolApprovalResponse and
// addToolOutput, as an application's page sends them.
//
//   node vercel_chat.mjs '{"url": "...", "chatId": "c1", "steps": [...]}'
//
// Steps, in order, each waiting until the chat is idle again:
//   {"send": "text"}                       a user message
//   {"send": "text", "stopOn": "text"}     ... and chat.stop() once a text part streams in
//   {"send": "text", "stopOn": "tool"}     ... and chat.stop() once a tool part streams in
//   {"approve": true, "reason": "..."}     answer every approval-requested tool part
//   {"output": value} / {"errorText": "."} addToolOutput for every input-available tool part
//   {"resend": true}                       sendMessage() with no message (continue)
//   {"wait": "/a/file"}                    wait until that file exists (another process acts)
// "plainPage": true leaves out the page's StoppedCalls lines (docs/ui.md): a page without them.
// Prints {"messages", "status", "errors", "data", "statuses", "after"} as JSON ("after": the
// messages after each step that sent something).

import { existsSync } from 'node:fs';
import { AbstractChat, DefaultChatTransport, isToolUIPart } from 'ai';

class State {
  constructor() {
    this.status = 'ready';
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
const data = [];
const statuses = [];
const after = [];
const chat = new Chat({
  id: scenario.chatId,
  transport: new DefaultChatTransport({ api: scenario.url, headers: scenario.headers, body: scenario.body }),
  onError: error => errors.push(error.message),
  onData: part => {
    data.push(part);
    // A page's lines for a chat stopped mid-tool (docs/ui.md): the server's next response says
    // how each call the page still shows running ended; addToolOutput finishes its tool part in
    // the message that holds it (no chunk of a later response can reach an earlier message).
    if (part.type === 'data-agentloop' && part.data.type === 'StoppedCalls' && !scenario.plainPage) {
      for (const call of part.data.calls) {
        void chat.addToolOutput(
          'errorText' in call
            ? { state: 'output-error', tool: call.toolName, toolCallId: call.toolCallId, errorText: call.errorText }
            : { tool: call.toolName, toolCallId: call.toolCallId, output: call.output },
        );
      }
    }
  },
});

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function idle() {
  for (let i = 0; i < 3000; i++) {
    if (chat.status === 'ready' || chat.status === 'error') return;
    await sleep(5);
  }
  throw new Error(`the chat is still ${chat.status} after 15 s`);
}

function toolParts(state) {
  return chat.seen.messages.flatMap(m => m.parts).filter(p => isToolUIPart(p) && p.state === state);
}

async function stopOn(kind) {
  const seen = kind === 'tool' ? isToolUIPart : p => p.type === 'text' && p.text;
  for (let i = 0; i < 3000; i++) {
    const last = chat.seen.messages.at(-1);
    if (last?.role === 'assistant' && last.parts.some(seen)) {
      await chat.stop();
      return;
    }
    await sleep(5);
  }
  throw new Error(`no ${kind} part streamed in 15 s`);
}

for (const step of scenario.steps) {
  if ('wait' in step) {
    while (!existsSync(step.wait)) await sleep(20);
    continue;
  }
  if ('send' in step) {
    const sent = chat.sendMessage({ text: step.send });
    if (step.stopOn) await stopOn(step.stopOn);
    await sent;
  } else if ('approve' in step) {
    for (const part of toolParts('approval-requested')) {
      await chat.addToolApprovalResponse({ id: part.approval.id, approved: step.approve, reason: step.reason });
    }
    await chat.sendMessage();
  } else if ('output' in step || 'errorText' in step) {
    for (const part of toolParts('input-available')) {
      const tool = part.type === 'dynamic-tool' ? part.toolName : part.type.slice(5);
      await chat.addToolOutput(
        'errorText' in step
          ? { state: 'output-error', tool, toolCallId: part.toolCallId, errorText: step.errorText }
          : { tool, toolCallId: part.toolCallId, output: step.output },
      );
    }
    await chat.sendMessage();
  } else if ('resend' in step) {
    await chat.sendMessage();
  }
  await idle();
  statuses.push(chat.status);
  after.push(structuredClone(chat.seen.messages));
}

console.log(JSON.stringify({ messages: chat.seen.messages, status: chat.status, errors, data, statuses, after }));
