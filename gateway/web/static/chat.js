// The chat column: one session's history, the answer streaming in as `chat` deltas, and the tool
// steps of the running turn as `agent` events arrive. Answers are shown as sanitised Markdown
// (markdown.js), a run's tool calls as a collapsible block of steps (steps.js). A chat command
// (/help, /status, /stop, …) is answered by the gateway at once (docs/protocol.md): its answer is
// shown as a command reply, plain text, apart from the model's answers.

import { el, clear } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { addStep, finishStep, stepsBlock } from "./steps.js";
import { approvalCard } from "./approval.js";

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
    this.queued = new Map(); // runId -> the user's message, sent while another answer was running
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
    gateway.on("approval", (p) => this.onApproval(p));
  }

  async open(session) {
    this.session = session;
    this.title.textContent = session;
    this.runs.clear();
    this.queued.clear();
    this.commands.clear();
    clear(this.log);
    try {
      const { messages } = await this.gateway.request("chat.history", { session, limit: 200 });
      this.past(messages);
      const { pending } = await this.gateway.request("approvals.list");
      for (const a of pending) this.onApproval({ state: "requested", ...a });
    } catch (error) {
      this.onError(error);
    }
    this.scroll();
  }

  async send() {
    const text = this.input.value.trim();
    if (!text) return;
    this.input.value = "";
    const mine = this.bubble("user", text);
    // Sent while an answer is still coming: the session runs it next, and the page says so (a chat
    // command is not queued: the gateway answers it at once).
    const busy = [...this.runs.values()].some((r) => r.answer.classList.contains("streaming"));
    const command = text.startsWith("/");
    if (busy && !command) {
      mine.classList.add("queued");
      mine.append(el("div", { class: "queued-note", text: "queued: runs after the current answer" }));
    }
    try {
      const ack = await this.gateway.request("chat.send", { session: this.session, text });
      if (ack.status === "command") {
        this.unqueue(mine);
        mine.classList.add("command");
        this.commandReply({ runId: ack.runId, command: ack.command, text: ack.text });
      } else {
        const runId = ack.runId;
        if (busy && !this.runs.has(runId)) this.queued.set(runId, mine);
        else this.unqueue(mine);
        if (!busy) this.run(runId);
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
      if (message.from) { // a cron job's or the heartbeat's answer delivered here: its own labelled bubble
        group = null;
        this.gateway.had(this.session, message.seq, message.runId);
        // Handed over live while the history loaded (the reply was waiting for a client): moved into place.
        const live = message.runId && this.runs.get(message.runId);
        if (live) {
          this.log.append(live.steps, live.answer);
          continue;
        }
        const node = this.bubble("assistant", "");
        node.dataset.seq = String(message.seq || "");
        node.querySelector(".text").before(el("div", { class: "from", text: fromLabel(message.from) }));
        if (message.error) node.querySelector(".text").textContent = message.text;
        else this.markdown(node.querySelector(".text"), message.text);
        continue;
      }
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
      const waited = this.queued.get(runId);
      if (waited) { // its turn has come
        this.queued.delete(runId);
        this.unqueue(waited);
      }
    }
    return run;
  }

  unqueue(bubble) {
    bubble.classList.remove("queued");
    bubble.querySelector(".queued-note")?.remove();
  }

  // An approval for this session: a card in the chat itself (on a phone the side panels are far
  // below), and the step that waits for it says so instead of "running".
  onApproval(p) {
    if (p.state === "resolved") {
      const card = this.log.querySelector(`.approval[data-id="${CSS.escape(p.id)}"]`);
      if (card) card.replaceWith(el("div", { class: "msg event approval-done", dataset: { id: p.id } },
        el("div", { class: "text", text: `${card.dataset.tool} ${p.approved ? "approved" : "denied"}`
          + (["approved", "denied"].includes(p.how) ? "" : ` (${p.how})`) })));
      for (const run of this.runs.values()) {
        for (const item of run.tools.values()) {
          if (item.dataset.approval === p.id) {
            delete item.dataset.approval;
            if (item.dataset.status === "awaiting approval") finishStep(run.steps, item, "running");
          }
        }
      }
      return;
    }
    if (p.session_key !== this.session || this.log.querySelector(`.approval[data-id="${CSS.escape(p.id)}"]`)) return;
    const card = approvalCard(this.gateway, p, { onError: this.onError });
    card.classList.add("in-chat");
    this.log.append(card);
    const waiting = [...this.runs.values()].flatMap((run) => [...run.tools.values()].map((item) => [run, item]))
      .reverse().find(([, item]) => item.dataset.status === "running" && item.dataset.tool === p.tool);
    if (waiting) {
      waiting[1].dataset.approval = p.id;
      finishStep(waiting[0].steps, waiting[1], "awaiting approval");
    }
    this.scroll();
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
    if (p.from && !run.answer.querySelector(".from")) target.before(el("div", { class: "from", text: fromLabel(p.from) }));
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

// Where an answer nobody typed for came from: "from cron job "stand-up" · every 1h", "from the heartbeat".
function fromLabel(origin) {
  if (origin.kind === "cron") return `from cron job "${origin.name || origin.job}"${origin.schedule ? ` · ${origin.schedule}` : ""}`;
  if (origin.kind === "heartbeat") return "from the heartbeat";
  if (origin.kind === "hook") return `from webhook "${origin.name}"`;
  return `from ${origin.kind}`;
}
