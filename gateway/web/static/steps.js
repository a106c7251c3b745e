// A run's tool calls as one collapsible block of steps: open while they arrive live (`agent`
// events), closed when read back from `chat.history` (each assistant turn's `steps`).

import { el } from "./dom.js";

const FINISHED = new Set(["ok"]);
const WAITING = new Set(["running", "pending", "awaiting approval"]);

export function stepsBlock({ runId, open }) {
  const block = el("details", { class: "steps", dataset: { run: runId || "" }, open: Boolean(open) },
    el("summary", { class: "steps-head" }), el("ol", { class: "step-list" }));
  heading(block);
  return block;
}

// One call: tool name, its arguments in short, then how it ended and how long it took.
export function addStep(block, { tool, summary, status = "running", durationMs }) {
  const item = el("li", { class: "step", dataset: { tool, status } },
    el("span", { class: "tool", text: tool }), " ", el("span", { class: "summary", text: summary || "" }));
  block.querySelector(".step-list").append(item);
  mark(item, status, durationMs);
  heading(block);
  return item;
}

export function finishStep(block, item, status, durationMs) {
  item.dataset.status = status;
  mark(item, status, durationMs);
  heading(block);
}

function mark(item, status, durationMs) {
  item.classList.remove("running", "awaiting", "ok", "failed", "unknown");
  item.classList.add(status === "awaiting approval" ? "awaiting" : WAITING.has(status) ? "running"
    : FINISHED.has(status) ? "ok" : status === "unknown" ? "unknown" : "failed");
  item.querySelector(".took")?.remove();
  if (status === "awaiting approval") item.append(el("span", { class: "took", text: " waiting for your approval" }));
  if (WAITING.has(status)) return;
  const took = durationMs === undefined || durationMs === null ? "" : ` · ${Math.round(durationMs)} ms`;
  item.append(el("span", { class: "took", text: ` ${status}${took}` }));
}

// "3 tool steps · 1 failed · 1 running": what the closed block still tells.
function heading(block) {
  const items = [...block.querySelectorAll(".step")];
  const count = (cls) => items.filter((item) => item.classList.contains(cls)).length;
  const parts = [`${items.length} tool step${items.length === 1 ? "" : "s"}`];
  for (const [cls, word] of [["failed", "failed"], ["unknown", "outcome unknown"], ["awaiting", "waiting for approval"],
    ["running", "running"]]) {
    if (count(cls)) parts.push(`${count(cls)} ${word}`);
  }
  block.querySelector(".steps-head").textContent = parts.join(" · ");
  block.dataset.count = String(items.length);
}
