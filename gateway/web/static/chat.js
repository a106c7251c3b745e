// The chat column: one session's history, the answer streaming in as `chat` deltas, and the tool
// steps of the running turn as `agent` events arrive.

import { el, clear } from "./dom.js";

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
    clear(this.log);
    try {
      const { messages } = await this.gateway.request("chat.history", { session, limit: 200 });
      for (const message of messages) {
        if (message.role === "user") this.bubble("user", message.text);
        else if (message.role === "assistant" && message.text) this.bubble("assistant", message.text);
        else if (message.role === "assistant" && message.tools?.length)
          this.log.append(el("div", { class: "steps past", text: `tools: ${message.tools.join(", ")}` }));
        else if (message.role === "event" && message.text) this.bubble("event", message.text);
      }
    } catch (error) {
      this.onError(error);
    }
    this.scroll();
  }

  async send() {
    const text = this.input.value.trim();
    if (!text) return;
    this.input.value = "";
    this.bubble("user", text);
    try {
      const { runId } = await this.gateway.request("chat.send", { session: this.session, text });
      this.run(runId);
    } catch (error) {
      this.bubble("error", `not sent: ${error.message}`);
    }
    this.scroll();
  }

  bubble(role, text) {
    const node = el("div", { class: `msg ${role}`, dataset: { role } }, el("div", { class: "text", text }));
    this.log.append(node);
    return node;
  }

  // The place a run's steps and answer appear; created by whichever comes first.
  run(runId) {
    let run = this.runs.get(runId);
    if (!run) {
      const steps = el("ol", { class: "steps", dataset: { run: runId } });
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
    const run = this.run(p.runId);
    const target = run.answer.querySelector(".text");
    if (p.state === "delta") {
      if (p.restart) run.text = ""; // the model call was retried: the preview starts again
      run.text += p.text;
      target.textContent = run.text;
    } else {
      target.textContent = p.text;
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
      const item = el("li", { class: "step running", dataset: { tool: p.tool, status: "running" } },
        el("span", { class: "tool", text: p.tool }), " ", el("span", { class: "summary", text: p.summary || "" }));
      run.tools.set(p.id, item);
      run.steps.append(item);
    } else if (p.stream === "tool_end") {
      const item = run.tools.get(p.id);
      if (item) {
        item.classList.remove("running");
        item.classList.add(p.status === "ok" ? "ok" : "failed");
        item.dataset.status = p.status;
        item.append(el("span", { class: "took", text: ` ${p.status} · ${Math.round(p.duration_ms || 0)} ms` }));
      }
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
