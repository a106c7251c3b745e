// The control page's entry: ask for the token (kept in sessionStorage, never in the URL), connect
// to the gateway this page came from, and start the chat and the panels.

import { Gateway } from "./gateway.js";
import { ChatView } from "./chat.js";
import { ApprovalsPanel, CronPanel, SessionsPanel, StatusPanel, TasksPanel } from "./panels.js";
import { CheckpointsPanel } from "./checkpoints.js";
import { ChannelsPanel } from "./links.js";

const TOKEN_KEY = "clawgate.token";
const NOTICE_KEY = "clawgate.notice"; // why the last session ended, shown at the login
const $ = (selector) => document.querySelector(selector);

function gatewayUrl() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/`;
}

function showError(error) {
  const bar = $("#error");
  bar.textContent = error?.message || String(error);
  bar.hidden = false;
  clearTimeout(showError.timer);
  showError.timer = setTimeout(() => { bar.hidden = true; }, 8000);
}

function setState(text, ok) {
  const state = $("#conn-state");
  state.textContent = text;
  state.className = ok ? "ok" : "bad";
}

async function start(token) {
  const gateway = new Gateway(gatewayUrl(), token);
  const hello = await gateway.connect();
  sessionStorage.setItem(TOKEN_KEY, token);
  $("#login").hidden = true;
  $("#app").hidden = false;
  setState(`connected · ${hello.server.name} ${hello.server.version}`, true);

  const main = $("#app");
  const options = { onError: showError };
  const chat = new ChatView(gateway, main, options);
  // Opening a session shows its chat and its checkpoint timeline; a fork or a restore opens one too.
  const open = (key) => Promise.all([chat.open(key), checkpoints.select(key), sessions.refresh()]);
  const sessions = new SessionsPanel(gateway, main, { ...options, onOpen: (key) => open(key) });
  const checkpoints = new CheckpointsPanel(gateway, main, { ...options, onOpen: (key) => open(key) });
  const panels = [
    new ApprovalsPanel(gateway, main, options),
    new TasksPanel(gateway, main, options),
    new CronPanel(gateway, main, options),
    sessions,
    checkpoints,
    new ChannelsPanel(gateway, main, options),
    new StatusPanel(gateway, main, options),
  ];
  const refreshAll = () => Promise.all(panels.map((panel) => panel.refresh()));
  // A restarted daemon comes back on the same port: reconnect with the same token and reload
  // the panels; the chat resumes after the last reply it saw, so an answer given meanwhile
  // arrives as its own event (gateway.js) instead of the chat being read again.
  gateway.onclose = (event) => {
    const why = event.reason ? `: ${event.reason}` : "";
    setState(`disconnected${why} — reconnecting…`, false);
    setTimeout(async function retry() {
      try {
        const again = await gateway.connect();
        setState(`connected · ${again.server.name} ${again.server.version}`, true);
        await refreshAll();
      } catch (error) {
        if (String(error.message).startsWith("unauthorized")) backToLogin(error);
        else setTimeout(retry, 2000);
      }
    }, 1000);
  };
  $("#logout").onclick = () => {
    sessionStorage.removeItem(TOKEN_KEY);
    gateway.onclose = () => {};
    gateway.close();
    location.reload();
  };
  $("#open-session").onsubmit = (event) => {
    event.preventDefault();
    const key = $("#session-key").value.trim();
    if (key) open(key);
  };
  await chat.open("main");
  await Promise.all(panels.map((panel) => panel.refresh()));
  document.body.dataset.ready = "true";
}

// The token stopped working (changed in config.toml): forget it and ask again.
function backToLogin(error) {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.setItem(NOTICE_KEY, error.message);
  location.reload();
}

async function login(token) {
  const message = $("#login-error");
  message.textContent = "";
  try {
    await start(token);
  } catch (error) {
    sessionStorage.removeItem(TOKEN_KEY);
    $("#login").hidden = false;
    $("#app").hidden = true;
    message.textContent = error.message || "could not connect";
  }
}

$("#login-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("#token").value.trim();
  $("#token").value = "";
  if (token) login(token);
});

const notice = sessionStorage.getItem(NOTICE_KEY);
if (notice) {
  sessionStorage.removeItem(NOTICE_KEY);
  $("#login-error").textContent = notice;
}
const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved) login(saved);
