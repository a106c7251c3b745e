// The checkpoint timeline of the session open in the chat (docs/checkpoints.md): newest first,
// a detail view per checkpoint (checkpoints.show), Restore with a confirmation dialog, and Fork.
// Everything shown comes from the checkpoints.* methods; a restore that reports effects it cannot
// undo changes nothing until the dialog is confirmed again ("Restore anyway").

import { el, clear, when } from "./dom.js";

const MODES = [
  ["both", "Conversation and files", "the chat and the task go back, and the workspace's files become what they were"],
  ["conversation", "Conversation only", "the chat and the task go back; the files stay as they are now"],
  ["files", "Files only", "the workspace's files become what they were; the chat stays as it is"],
];

function label(cp) {
  if (cp.kind === "step") return cp.description || `step ${cp.step}`;
  return cp.description || cp.kind;
}

// The agent a session key belongs to, as config/agents.py `agent_id_of` reads it (a sub-agent's by its
// parent's key): named in show, restore and fork, since the daemon refuses another agent's checkpoint to a
// client naming none. {} for the default agent's plain keys.
function agentOf(key) {
  while (key.startsWith("sub-") && key.includes("@")) key = key.slice(key.indexOf("@") + 1);
  const found = /^agent:([a-z][a-z0-9_-]{0,31}):./.exec(key);
  return found ? { agent: found[1] } : {};
}

function filesLine(files) {
  if (!files || files.error) return files?.error || "";
  const parts = [];
  if (files.written?.length) parts.push(`${files.written.length} written back`);
  if (files.removed?.length) parts.push(`${files.removed.length} removed`);
  return parts.length ? `files: ${parts.join(", ")}` : "no files to change";
}

// The live branch: HEAD and its parents. Checkpoints off it belong to a branch a restore abandoned.
// Make `nodes` (nulls skipped) the children of `parent`, in order, moving a node only when it is not
// already where it belongs and removing the rest: the nodes kept are never detached.
function place(parent, nodes) {
  let cursor = parent.firstChild;
  for (const node of nodes) {
    if (!node) continue;
    if (node === cursor) cursor = cursor.nextSibling;
    else parent.insertBefore(node, cursor);
  }
  while (cursor) {
    const next = cursor.nextSibling;
    cursor.remove();
    cursor = next;
  }
}

function liveBranch(checkpoints, head) {
  const byId = new Map(checkpoints.map((cp) => [cp.id, cp]));
  const live = new Set();
  for (let id = head; id && byId.has(id) && !live.has(id); id = byId.get(id).parent) live.add(id);
  return live;
}

export class CheckpointsPanel {
  constructor(gateway, root, { onError, onOpen }) {
    this.gateway = gateway;
    this.list = root.querySelector("#checkpoints");
    this.title = root.querySelector("#checkpoints-session");
    this.status = root.querySelector("#checkpoints-status");
    this.dialog = new RestoreDialog(gateway, document.querySelector("#restore-dialog"), {
      onError, onRestored: (result) => this.restored(result),
    });
    this.onError = onError;
    this.onOpen = onOpen;
    this.session = "main";
    this.opened = null; // the checkpoint whose details are shown
    this.live = new Set();
    let timer = null;
    gateway.on("checkpoint", (p) => {
      if (p.session !== this.session) return;
      clearTimeout(timer);
      timer = setTimeout(() => this.refresh(), 200);
    });
  }

  async select(session) {
    if (session !== this.session) {
      this.opened = null;
      this.status.textContent = "";
    }
    this.session = session;
    this.title.textContent = session;
    await this.refresh();
  }

  async refresh() {
    const session = this.session;
    try {
      const { checkpoints, problems, head } = await this.gateway.request("checkpoints.list", { session, limit: 100 });
      if (session !== this.session) return; // another session was opened meanwhile
      this.live = liveBranch(checkpoints, head);
      this.render(checkpoints, problems?.[0]);
      if (this.opened && checkpoints.some((cp) => cp.id === this.opened)) await this.details(this.opened);
    } catch (error) {
      this.onError(error);
    }
  }

  // Changes go in place, keyed by checkpoint id: a row, its open details and their buttons stay the
  // same nodes across refreshes (one comes with every checkpoint event), so a click is never lost to
  // a redraw, and only what changed is touched.
  render(checkpoints, problem) {
    const note = problem ? this.part(".problems", () => el("p", { class: "problems" })) : null;
    if (note && note.textContent !== problem) note.textContent = problem;
    if (!checkpoints.length) {
      place(this.list, [note, this.part(".empty", () => el("p", { class: "empty", text: "No checkpoints in this session yet." }))]);
      return;
    }
    const timeline = this.part(".timeline", () => el("ol", { class: "timeline" }));
    const rows = new Map([...timeline.children].map((node) => [node.dataset.id, node]));
    place(timeline, checkpoints.map((cp) => {
      const node = rows.get(cp.id) || this.item(cp);
      this.update(node, cp);
      return node;
    }));
    place(this.list, [note, timeline]);
  }

  part(selector, make) {
    return this.list.querySelector(`:scope > ${selector}`) || make();
  }

  item(cp) {
    return el("li", { dataset: { id: cp.id } },
      el("button", { type: "button", class: "cp-row", onclick: () => this.toggle(cp.id) }),
      el("div", { class: "cp-details" }));
  }

  update(node, cp) {
    const abandoned = !this.live.has(cp.id);
    const shown = JSON.stringify([cp, abandoned]);
    if (node.dataset.shown !== shown) {
      node.dataset.shown = shown;
      const files = cp.filesChanged === null || cp.filesChanged === undefined ? "" : `${cp.filesChanged} file${cp.filesChanged === 1 ? "" : "s"}`;
      Object.assign(node.dataset, { kind: cp.kind, step: cp.step ?? "", verified: String(Boolean(cp.verified)),
        branch: abandoned ? "abandoned" : "live" });
      if (abandoned) node.title = "on an abandoned branch: the session went back to an earlier point";
      else node.removeAttribute("title");
      clear(node.querySelector(".cp-row"),
        el("span", { class: "when", text: when(cp.time) }), " ",
        el("span", { class: `kind ${cp.kind}`, text: cp.kind }), " ",
        el("span", { class: "label", text: label(cp) }),
        cp.verified ? el("span", { class: "verified", title: "the step was completed with a verification", text: " ✓ verified" }) : null,
        files ? el("span", { class: "files", text: ` · ${files}` }) : null,
        abandoned ? el("span", { class: "branch", text: " · abandoned" }) : null);
    }
    node.className = `checkpoint ${cp.kind}${cp.id === this.opened ? " open" : ""}${abandoned ? " abandoned" : ""}`;
    const details = node.querySelector(".cp-details");
    if (cp.id !== this.opened && details.firstChild) clear(details); // closed elsewhere (a restore, a switch)
  }

  async toggle(id) {
    this.opened = this.opened === id ? null : id;
    for (const node of this.list.querySelectorAll(".checkpoint")) {
      node.classList.toggle("open", node.dataset.id === this.opened);
      if (node.dataset.id !== this.opened) clear(node.querySelector(".cp-details"));
    }
    if (this.opened) await this.details(id);
  }

  async details(id) {
    const row = () => this.list.querySelector(`.checkpoint[data-id="${CSS.escape(id)}"] .cp-details`);
    if (!row()) return;
    try {
      const shown = await this.gateway.request("checkpoints.show", { id, ...agentOf(this.session) });
      const node = row();
      if (!node || this.opened !== id) return; // closed (or another opened) meanwhile
      const key = JSON.stringify(shown);
      if (node.shownKey === key && node.querySelector(".actions")) return; // nothing changed: leave it be
      node.shownKey = key;
      node.shown = shown; // what the buttons act on, read when pressed
      const actions = node.querySelector(":scope > .actions") || el("div", { class: "actions" },
        el("button", { type: "button", class: "restore", text: "Restore…", onclick: () => this.dialog.open(node.shown) }),
        el("button", { type: "button", class: "fork secondary", text: "Fork", onclick: () => this.fork(node.shown.checkpoint) }));
      const body = node.querySelector(":scope > .cp-body") || el("div", { class: "cp-body" });
      clear(body, this.detailView(shown));
      place(node, [body, actions]);
    } catch (error) {
      const node = row();
      if (node) clear(node, el("p", { class: "cp-error", text: error.message }));
      this.onError(error);
    }
  }

  detailView(shown) {
    const cp = shown.checkpoint;
    const task = shown.task;
    const wouldChange = shown.restoreWouldChange || {};
    const history = (shown.history || []).filter((h) => h.text).slice(-4);
    return [
      el("dl", { class: "cp-facts" },
        el("dt", { text: "id" }), el("dd", { text: cp.id }),
        el("dt", { text: "when" }), el("dd", { text: when(cp.time) }),
        el("dt", { text: "kind" }), el("dd", { text: cp.kind + (cp.step ? ` (step ${cp.step})` : "") + (cp.verified ? ", verified" : "") }),
        el("dt", { text: "workspace" }), el("dd", { text: `${shown.workspaceFiles} files` }),
        shown.changedFiles?.length ? [el("dt", { text: "changed" }), el("dd", { class: "changed", text: shown.changedFiles.join(", ") })] : null,
        el("dt", { text: "restore" }), el("dd", { class: "would-change", text: filesLine(wouldChange) })),
      task ? el("ol", { class: "task-steps" }, task.steps.map((s) =>
        el("li", { class: `task-step ${s.status}`, dataset: { status: s.status } },
          el("span", { class: "mark", text: { done: "✓", skipped: "–", failed: "✗", in_progress: "▸" }[s.status] || "○" }), " ", s.text))) : null,
      history.length ? el("ul", { class: "cp-history" }, history.map((h) =>
        el("li", { class: h.role }, el("span", { class: "role", text: `${h.role}: ` }), (h.text || "").slice(0, 160)))) : null,
      shown.irreversible?.length ? el("p", { class: "irreversible-note",
        text: `${shown.irreversible.length} effect(s) after this point cannot be undone.` }) : null,
    ];
  }

  async fork(cp) {
    try {
      const result = await this.gateway.request("checkpoints.fork", { id: cp.id, ...agentOf(cp.session) });
      await this.onOpen(result.session); // the page switches to the new session
      this.status.textContent = `Forked ${result.session} from ${label(cp)} of ${cp.session}.`;
    } catch (error) {
      this.onError(error);
    }
  }

  async restored(result) {
    const cp = result.checkpoint;
    const files = result.files ? ` · ${filesLine(result.files)}` : "";
    this.opened = null;
    await this.onOpen(this.session); // the chat and this timeline read again
    this.status.textContent = `Restored ${result.mode} to ${label(cp)}${files}.`;
  }
}

class RestoreDialog {
  constructor(gateway, node, { onError, onRestored }) {
    this.gateway = gateway;
    this.node = node;
    this.onError = onError;
    this.onRestored = onRestored;
    this.shown = null;
    this.confirm = false;
    node.querySelector(".cancel").addEventListener("click", () => node.close());
    node.querySelector(".do-restore").addEventListener("click", () => this.restore());
    clear(node.querySelector(".modes"), MODES.map(([value, name, what], i) =>
      el("label", { class: "mode" },
        el("input", { type: "radio", name: "restore-mode", value, checked: i === 0,
          onchange: () => this.reset() }), ` ${name}`, el("span", { class: "what", text: ` — ${what}` }))));
  }

  open(shown) {
    this.shown = shown;
    this.node.querySelector(".target").textContent = label(shown.checkpoint);
    for (const input of this.node.querySelectorAll("input[name=restore-mode]")) input.checked = input.value === "both";
    this.reset();
    this.node.showModal();
  }

  reset() {
    this.confirm = false;
    this.node.querySelector(".irreversible").hidden = true;
    this.node.querySelector(".do-restore").textContent = "Restore";
    this.node.querySelector(".would-change").textContent = this.mode() === "conversation"
      ? "files: left as they are" : filesLine(this.shown?.restoreWouldChange);
  }

  mode() {
    return this.node.querySelector("input[name=restore-mode]:checked")?.value || "both";
  }

  async restore() {
    const button = this.node.querySelector(".do-restore");
    button.disabled = true;
    try {
      const result = await this.gateway.request("checkpoints.restore",
        { id: this.shown.checkpoint.id, mode: this.mode(), confirm: this.confirm, ...agentOf(this.shown.checkpoint.session) });
      if (!result.restored) { // effects after the point cannot be undone: list them, ask again
        this.confirm = true;
        const box = this.node.querySelector(".irreversible");
        clear(box.querySelector("ul"), result.irreversible.map((e) =>
          el("li", {}, el("span", { class: "what", text: e.what }), e.summary ? `: ${e.summary}` : "",
            e.time ? el("span", { class: "when", text: ` (${when(e.time)})` }) : null)));
        box.hidden = false;
        button.textContent = "Restore anyway";
        return;
      }
      this.node.close();
      await this.onRestored(result);
    } catch (error) {
      this.onError(error);
    } finally {
      button.disabled = false;
    }
  }
}
