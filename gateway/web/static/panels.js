// The side panels: each reads its list with one method and refreshes when its event arrives, so
// what the page shows is what the daemon holds, not a copy the page keeps in step by itself.

import { el, clear, when, count } from "./dom.js";
import { approvalCard } from "./approval.js";

// Coalesce bursts of events into one refresh per panel.
function debounce(fn, ms = 150) {
  let timer = null;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
}

function fromNow(seconds) {
  const left = Math.round(seconds - Date.now() / 1000);
  if (left <= 0) return "due now";
  const d = Math.floor(left / 86400), h = Math.floor((left % 86400) / 3600), m = Math.floor((left % 3600) / 60);
  return "in " + (d ? `${d}d ${h}h` : h ? `${h}h ${m}m` : m ? `${m}m` : `${left}s`);
}

// A run's end or answer changes sessions and usage.
function onRunChange(gateway, refresh) {
  gateway.on("agent", (p) => { if (p.stream === "run_end" || p.stream === "turn_end") refresh(); });
  gateway.on("chat", (p) => { if (p.state !== "delta") refresh(); });
}

export class ApprovalsPanel {
  constructor(gateway, root, { onError }) {
    this.gateway = gateway;
    this.list = root.querySelector("#approvals");
    this.badge = document.querySelector("#approvals-count");
    this.onError = onError;
    const refresh = debounce(() => this.refresh(), 50);
    gateway.on("approval", refresh);
  }

  async refresh() {
    try {
      const { pending } = await this.gateway.request("approvals.list");
      this.badge.textContent = pending.length ? String(pending.length) : "";
      clear(this.list, pending.length ? pending.map((a) => this.card(a))
        : el("p", { class: "empty", text: "Nothing waits for your approval." }));
    } catch (error) {
      this.onError(error);
    }
  }

  card(a) {
    return approvalCard(this.gateway, a, { onError: this.onError, onDone: () => this.refresh() });
  }
}

export class TasksPanel {
  constructor(gateway, root, { onError }) {
    this.gateway = gateway;
    this.list = root.querySelector("#tasks");
    this.onError = onError;
    this.opened = new Map(); // task id -> open, as the user left it
    gateway.on("task", debounce(() => this.refresh()));
  }

  async refresh() {
    try {
      const { tasks } = await this.gateway.request("tasks.list", { all: true });
      const newest = tasks.sort((a, b) => (b.updatedAt || 0) - (a.updatedAt || 0)).slice(0, 10);
      const full = await Promise.all(newest.map((t) => this.gateway.request("tasks.get", { id: t.id })));
      clear(this.list, full.length ? full.map(({ task }, i) => this.card(task, i === 0))
        : el("p", { class: "empty", text: "No tasks yet." }));
    } catch (error) {
      this.onError(error);
    }
  }

  card(task, newest) {
    const done = task.steps.filter((s) => s.status === "done" || s.status === "skipped").length;
    const active = task.status === "pending" || task.status === "in_progress";
    const open = this.opened.get(task.id) ?? (active || newest);
    return el("details", {
      class: `task ${task.status}`, open, dataset: { id: task.id, status: task.status },
      ontoggle: (event) => this.opened.set(task.id, event.target.open),
    },
      el("summary", {},
        el("span", { class: `badge ${task.status}`, text: task.status.replace("_", " ") }), " ",
        el("span", { class: "goal", text: task.goal }), " ",
        el("span", { class: "session", text: `in ${task.session_key || task.session}` }), " ",
        el("span", { class: "progress", text: `${done}/${task.steps.length}` })),
      el("ol", { class: "task-steps" }, task.steps.map((s) =>
        el("li", { class: `task-step ${s.status}`, dataset: { status: s.status }, title: s.verification || "" },
          el("span", { class: "mark", text: { done: "✓", skipped: "–", failed: "✗", in_progress: "▸" }[s.status] || "○" }),
          " ", s.text))),
      task.result ? el("p", { class: "result", text: task.result }) : null,
      active ? el("button", {
        type: "button", class: "cancel", text: "Cancel task",
        onclick: () => this.gateway.request("tasks.cancel", { id: task.id }).catch(this.onError),
      }) : null);
  }
}

export class CronPanel {
  constructor(gateway, root, { onError }) {
    this.gateway = gateway;
    this.list = root.querySelector("#cron");
    this.onError = onError;
    gateway.on("cron", debounce(() => this.refresh()));
  }

  async refresh() {
    try {
      const { jobs } = await this.gateway.request("cron.list");
      clear(this.list, jobs.length ? jobs.map((j) => this.card(j))
        : el("p", { class: "empty" }, "No cron jobs. Add one with ", el("code", { text: "clawgate cron add" }),
          " or ask the agent."));
    } catch (error) {
      this.onError(error);
    }
  }

  card(job) {
    const history = el("ol", { class: "runs" });
    const toggle = async (event) => {
      if (!event.target.open) return;
      try {
        const { runs } = await this.gateway.request("cron.runs", { id: job.id, limit: 10 });
        clear(history, runs.length ? runs.map((r) => el("li", { class: `run ${r.status}` },
          el("span", { class: "when", text: when(r.startedAt || r.scheduledAt) }), " ",
          el("span", { class: "status", text: r.status }), r.result ? ` — ${r.result}` : ""))
          : el("li", { class: "empty", text: "no runs yet" }));
      } catch (error) {
        this.onError(error);
      }
    };
    return el("div", { class: `job ${job.enabled ? "on" : "off"}`, dataset: { id: job.id } },
      el("div", { class: "head" }, el("span", { class: "name", text: job.name || job.id }),
        el("span", { class: "describe", text: ` ${job.describe}` })),
      el("div", { class: "next" }, "next run: ",
        el("span", { class: "next-run", text: job.enabled ? when(job.nextRunAt) : "disabled" }),
        job.enabled && job.nextRunAt ? el("span", { class: "in", text: ` (${fromNow(job.nextRunAt)})` }) : null),
      el("div", { class: "last" }, `last: ${job.lastStatus || "never ran"}`,
        job.failures ? ` (${job.failures} failures)` : ""),
      el("details", { class: "history", ontoggle: toggle }, el("summary", { text: "History" }), history));
  }
}

export class SessionsPanel {
  constructor(gateway, root, { onError, onOpen }) {
    this.gateway = gateway;
    this.list = root.querySelector("#sessions");
    this.onError = onError;
    this.onOpen = onOpen;
    onRunChange(gateway, debounce(() => this.refresh(), 300));
  }

  async refresh() {
    try {
      const { sessions } = await this.gateway.request("sessions.list");
      sessions.sort((a, b) => (b.updatedAt || 0) - (a.updatedAt || 0));
      clear(this.list, sessions.length ? sessions.map((s) => el("li", {},
        el("button", { type: "button", class: "link", onclick: () => this.onOpen(s.key), text: s.key }),
        el("span", { class: "meta", text: ` ${s.agent ? `${s.agent} · ` : ""}${s.messages} message${s.messages === 1 ? "" : "s"} · ${when(s.updatedAt)}${s.busy ? " · busy" : ""}` })))
        : el("li", { class: "empty", text: "No sessions yet." }));
    } catch (error) {
      this.onError(error);
    }
  }
}

/** The channels and, for chat platforms, their state: "telegram running", "discord retrying (unreachable)". */
function channelText(s) {
  const states = s.channelStates || {};
  return [...new Set([...(s.channels || []), ...Object.keys(states)])].map((name) => {
    const c = states[name];
    if (!c) return name;
    return c.state === "running" ? `${name} running` : `${name} ${c.state}${c.reason ? ` (${c.reason})` : ""}`;
  }).join(", ");
}

// fleet mode (docs/fleet.md): this process, every process with its partitions, the backlog per partition,
// and who runs each once-per-bot connection; nothing when the daemon runs alone
function fleetRows(f) {
  if (!f) return [];
  const lag = Object.entries(f.lag || {}).map(([p, n]) => `p${p}: ${n}`);
  return [
    ["fleet node", `${f.node} (${(f.held || []).length} of ${f.partitions} partitions)`],
    ["fleet processes", (f.processes || []).map((p) => `${p.node} pid ${p.pid} :${p.port} (${p.partitions})`).join(", ")],
    ["fleet backlog", lag.join(", ") || "none"],
    ["fleet singletons", Object.entries(f.singletons || {}).map(([k, v]) => `${k} on ${v || "nobody"}`).join(", ") || "none"],
  ];
}

// Inbound webhooks (docs/hooks.md): a row per hook, its target and its last three calls.
function hookRows(hooks) {
  return (hooks || []).map((h) => {
    const calls = (h.lastCalls || []).slice(0, 3).map((c) => `${c.status} at ${when(c.at)}${c.note ? ` (${c.note})` : ""}`);
    return [`hook ${h.name}`, `${h.auth} → ${h.deliver}; last calls: ${calls.join(", ") || "none"}`];
  });
}

export class StatusPanel {
  constructor(gateway, root, { onError }) {
    this.gateway = gateway;
    this.box = root.querySelector("#status");
    this.onError = onError;
    const refresh = debounce(() => this.refresh(), 300);
    gateway.on("tick", refresh);
    gateway.on("bg_job_start", refresh);
    gateway.on("bg_job_end", refresh);
    onRunChange(gateway, refresh);
  }

  async refresh() {
    try {
      const s = await this.gateway.request("status");
      // usage: persisted per day and in total (kept across restarts), see docs/providers.md
      const usage = s.usage || {}, today = usage.today || {}, total = usage.total || {};
      const tokens = (c) => `${count(c.input_tokens)} in · ${count(c.output_tokens)} out`;
      const cache = (c) => `${count(c.cache_read_input_tokens)} read · ${count(c.cache_creation_input_tokens)} write`;
      const top = (usage.topSessions || []).map((t) => `${t.session || "(none)"} ${count(t.input_tokens + t.output_tokens)}`);
      const breakers = (s.providers || []).map((p) => p.state === "closed" ? `${p.name} ok`
        : p.state === "open" ? `${p.name} paused until ${when(p.retryAt)}`
        : `${p.name} trying again`);
      const rows = [
        ["version", s.version], ["provider", s.provider], ["model", s.model],
        ["providers", breakers.join(", ")],
        ["uptime", `${Math.round(s.uptime)} s`], ["channels", channelText(s)],
        ["active sessions", Array.isArray(s.activeSessions) ? s.activeSessions.length : s.activeSessions],
        ["clients", s.clients],
        ["model calls today", count(today.calls)],
        ["tokens today", tokens(today)], ["cache today", cache(today)],
        ["tokens in total", tokens(total)], ["cache in total", cache(total)],
        ["model calls in total", count(total.calls)],
        ["top sessions", top.join(", ")],
        ["background jobs", (s.backgroundJobs || []).map((j) => `${j.id} (${j.session}): ${j.summary}`).join("; ") || "none"],
        ...fleetRows(s.fleet),
        ...hookRows(s.hooks),
      ];
      clear(this.box, rows.map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v ?? "—" })]));
    } catch (error) {
      this.onError(error);
    }
  }
}
