// One tool call waiting for the owner: what it is, why it asks, and Approve / Deny. Shown in the
// Approvals panel and, for the open session, in the chat itself (reachable on a phone too).

import { el } from "./dom.js";

export function approvalCard(gateway, a, { onError, onDone = () => {} }) {
  const decide = (approve) => async (event) => {
    const card = event.target.closest(".approval");
    card.classList.add("deciding");
    for (const button of card.querySelectorAll("button")) button.disabled = true;
    try {
      await gateway.request("approvals.resolve", { id: a.id, approve });
    } catch (error) {
      onError(error);
      card.classList.remove("deciding");
      for (const button of card.querySelectorAll("button")) button.disabled = false;
    }
    onDone();
  };
  return el("div", { class: "approval", dataset: { id: a.id, tool: a.tool } },
    el("div", { class: "head" }, el("span", { class: "asks", text: "Waiting for your approval: " }),
      el("span", { class: "tool", text: a.tool }), el("span", { class: "where", text: ` in ${a.session_key}` })),
    // shown_*: the text with every invisible or reordering character written <U+XXXX> (agent/core/visible.py)
    el("pre", { class: "summary", text: a.shown_summary ?? a.summary }),
    el("p", { class: "reason", text: a.shown_reason ?? a.reason }),
    el("div", { class: "actions" },
      el("button", { class: "approve", type: "button", onclick: decide(true), text: "Approve" }),
      el("button", { class: "deny", type: "button", onclick: decide(false), text: "Deny" })));
}
