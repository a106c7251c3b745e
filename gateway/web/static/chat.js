// The chat column: one session's history, the answer streaming in as `chat` deltas, and the tool
// steps of the running turn as `agent` events arrive. Answers are shown as sanitised Markdown
// (markdown.js), a run's tool calls as a collapsible block of steps (steps.js). A chat command
// (/help, /status, /stop, …) is answered by the gateway at once (docs/protocol.md): its answer is
// shown as a command reply, plain text, apart from the model's answers.

import { el, clear } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { addStep, finishStep, stepsBlock } from "./steps.js";

export class ChatView {
  constructor(gateway, root, { onError }) {
    this.gateway = gateway;
    this.session = "main";
    this.onError = onError;
    this.log = root.querySelector("#messages");
    this.form = root.querySelector("#chat-form");
    this.input = root.querySelector("#chat-input");
    this.title = root.querySelector("#chat-session");
    this.stopButton = root.querySelector("#chat-stop");
    this.runs = new Map(); // runId -> {bubble, text, steps}
    this.commands = new Set(); // runIds of the command replies shown (the result and its event are one)
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        this.send();
      }
    });
    this.stopButton.addEventListener("click", () =>
      gateway.request("chat.stop", { session: this.session }).catch(onError));
    gateway.on("chat", (p) => this.onChat(p));
    gateway.on("agent", (p) => this.onAgent(p));
  }

  async open(session) {
    this.session = session;
    this.title.textContent = session;
    this.runs.clear();
    this.commands.clear();
    clear(this.log);
    try {
      const { messages } = await this.gateway.request("chat.history", { session, limit: 200 });
      this.past(messages);
    } catch (error) {
      this.onError(error);
    }
    this.scroll();
  }

  async send() {
    const text = this.input.value.trim();
    if (!text) return;
    this.input.value = "";
    const asked = this.bubble("user", text);
    try {
      const ack = await this.gateway.request("chat.send", { session: this.session, text });
      if (ack.status === "command") {
        asked.classList.add("command");
        this.commandReply({ runId: ack.runId, command: ack.command, text: ack.text });
      } else {
        this.run(ack.runId);
      }
    } catch (error) {
      this.bubble("error", `not sent: ${error.message}`);
    }
    this.scroll();
  }

  // The history as it was shown live: a run's assistant turns make one block of steps (closed)
  // and one answer, their texts joined as the streamed answer joined them.
  past(messages) {
    let group = null;
    for (const message of messages) {
      if (message.role === "assistant") {
        if (!group || group.runId !== message.runId) {
          group = { runId: message.runId, steps: stepsBlock({ runId: message.runId, open: false }), texts: [] };
          group.answer = this.bubble("assistant", "");
          group.answer.before(group.steps);
        }
        for (const step of message.steps || []) addStep(group.steps, step);
        if (message.text) group.texts.push(message.text);
        this.markdown(group.answer.querySelector(".text"), group.texts.join("\n\n"));
        continue;
      }
      if (message.role === "event" && !message.text) continue; // not shown, and not the end of a run
      group = null;
      if (message.role === "user") this.bubble("user", message.text);
      else if (message.role === "event") this.bubble("event", message.text);
    }
  }

  // A command's answer: plain text in its own style, never a model answer, shown once.
  commandReply(p) {
    if (this.commands.has(p.runId)) return;
    this.commands.add(p.runId);
    const node = this.bubble("command", p.text);
    node.dataset.command = p.command || "";
    node.dataset.run = p.runId;
    this.scroll();
  }

  bubble(role, text) {
    const node = el("div", { class: `msg ${role}`, dataset: { role } }, el("div", { class: "text", text }));
    this.log.append(node);
    return node;
  }

  markdown(target, text) {
    renderMarkdown(target, text, { onError: this.onError });
  }

  // The place a run's steps and answer appear; created by whichever comes first.
  run(runId) {
    let run = this.runs.get(runId);
    if (!run) {
      const steps = stepsBlock({ runId, open: true });
      const answer = el("div", { class: "msg assistant streaming", dataset: { role: "assistant", run: runId } },
        el("div", { class: "text" }));
      this.log.append(steps, answer);
      run = { steps, answer, text: "", tools: new Map() };
      this.runs.set(runId, run);
    }
    return run;
  }

  onChat(p) {
    if (p.session !== this.session || !p.runId) return;
    if (p.kind === "command") {
      this.commandReply(p);
      return;
    }
    if (p.kind === "file") { // a file the agent sent: its own line (files reach chat platforms only)
      this.log.append(el("div", { class: "msg assistant final", dataset: { role: "file", run: p.runId } },
        el("div", { class: "text" }, p.text)));
      this.scroll();
      return;
    }
    const run = this.run(p.runId);
    const target = run.answer.querySelector(".text");
    if (p.state === "delta") {
      if (p.restart) run.text = ""; // the model call was retried: the preview starts again
      run.text += p.text;
      this.markdown(target, run.text);
    } else if (p.state === "error") {
      target.textContent = p.text;
      target.classList.remove("md");
    } else {
      this.markdown(target, p.text);
    }
    if (p.state !== "delta") {
      run.answer.classList.remove("streaming");
      run.answer.classList.add(p.state === "error" ? "error" : "final");
      run.answer.dataset.state = p.state;
    }
    this.scroll();
  }

  onAgent(p) {
    if (p.session !== this.session || !p.runId) return;
    const run = this.run(p.runId);
    if (p.stream === "tool_start") {
      run.tools.set(p.id, addStep(run.steps, { tool: p.tool, summary: p.summary, status: "running" }));
    } else if (p.stream === "tool_end") {
      const item = run.tools.get(p.id);
      if (item) finishStep(run.steps, item, p.status, p.duration_ms || 0);
    } else if (p.stream === "turn_end" && run.text) {
      run.text += "\n\n"; // the next turn's text starts on its own paragraph
    } else if (p.stream === "run_end") {
      run.answer.classList.remove("streaming");
    }
    this.scroll();
  }

  scroll() {
    this.log.scrollTop = this.log.scrollHeight;
  }
}
