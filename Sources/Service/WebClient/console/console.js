// The SignalFetch console: paints a snapshot (/console/snapshot), then follows the event stream
// (/console/events), which replays what a reconnect missed (Last-Event-ID). Every value from the server is
// inserted as text, never as markup.
"use strict";

const state = {
  seen: new Set(),      // event ids painted: a replayed event is never painted twice
  lastEventId: 0,
  devices: new Map(),   // alias → row state
  commits: new Map(),   // account → {modseq, at} of its newest change
  samples: [],          // freshness samples (ms), the newest FRESHNESS_WINDOW
  totalBefore: 0,       // samples counted before the snapshot's events
  totalSince: 0,
  gateways: new Map(),
  stream: null,
};
const FRESHNESS_WINDOW = 1000;
const EVENTS_SHOWN = 500;

const $ = (id) => document.getElementById(id);
const time = (ms) => (ms ? new Date(ms).toISOString().slice(11, 23) : "–");
const millis = (ms) => (ms === undefined || ms === null ? "–" : `${Math.round(ms * 10) / 10} ms`);

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function deviceState(alias, fields) {
  let device = state.devices.get(alias);
  if (!device) {
    device = { alias, account: "", service: "", environment: "", app: "" };
    state.devices.set(alias, device);
  }
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) device[key] = value;
  return device;
}

function paintDevices() {
  const body = $("devices").querySelector("tbody");
  body.replaceChildren();
  const rows = [...state.devices.values()].sort((a, b) => (b.signalAt || 0) - (a.signalAt || 0)
                                                      || a.alias.localeCompare(b.alias));
  for (const device of rows) {
    const tr = document.createElement("tr");
    tr.dataset.device = device.alias;
    const commit = state.commits.get(device.account);
    cell(tr, device.account);
    cell(tr, device.alias);
    cell(tr, device.service);
    cell(tr, device.environment);
    cell(tr, device.app);
    cell(tr, commit ? `${time(commit.at)} (#${commit.modseq})` : "–", "commit");
    const signal = cell(tr, device.signalAt ? `${time(device.signalAt)} ${device.outcome} ${millis(device.latencyMs)}` : "–",
                        "signal");
    if (device.outcome && device.outcome !== "sent") signal.classList.add("bad");
    if (device.coalesced) {
      const mark = document.createElement("span");
      mark.className = "mark";
      mark.textContent = "coalesced";
      signal.appendChild(mark);
    }
    if (device.deferred) {
      const mark = document.createElement("span");
      mark.className = "mark";
      mark.textContent = "paced";
      signal.appendChild(mark);
    }
    cell(tr, device.fetchAt ? `${time(device.fetchAt)} (#${device.fetchModseq})` : "–", "fetch");
    const lag = device.commitAt && device.fetchAt && device.fetchModseq >= device.signalModseq
      ? `${device.signalAt - device.commitAt} ms → ${device.fetchAt - device.signalAt} ms`
      : "–";
    cell(tr, lag, "lag");
    // The trace of the change last signalled: the id to paste into the tracing backend (docs/operations.md).
    // Shown cut, selected and copied whole.
    const trace = cell(tr, device.trace || "–", "trace");
    if (device.trace) trace.title = device.trace;
    body.appendChild(tr);
  }
}

function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.max(0, Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1))];
}

function paintFreshness() {
  const sorted = [...state.samples].sort((a, b) => a - b);
  $("fresh-count").textContent = String(sorted.length);
  $("fresh-total").textContent = String(state.totalBefore + state.totalSince);
  $("fresh-p50").textContent = millis(percentile(sorted, 0.5));
  $("fresh-p90").textContent = millis(percentile(sorted, 0.9));
  $("fresh-p99").textContent = millis(percentile(sorted, 0.99));
  // 12 buckets, each twice the one before, from 5 ms.
  const bounds = Array.from({ length: 12 }, (_, i) => 5 * 2 ** i);
  const counts = bounds.map(() => 0);
  for (const value of sorted) {
    const index = bounds.findIndex((bound) => value <= bound);
    counts[index === -1 ? counts.length - 1 : index] += 1;
  }
  const most = Math.max(1, ...counts);
  const histogram = $("fresh-histogram");
  histogram.replaceChildren();
  counts.forEach((count, index) => {
    const bar = document.createElement("span");
    bar.style.height = `${(100 * count) / most}%`;
    bar.title = `≤ ${bounds[index]} ms: ${count}`;
    histogram.appendChild(bar);
  });
}

function paintGateways() {
  const body = $("gateways").querySelector("tbody");
  body.replaceChildren();
  for (const gateway of [...state.gateways.values()].sort((a, b) => a.service.localeCompare(b.service))) {
    const tr = document.createElement("tr");
    cell(tr, gateway.service);
    cell(tr, Object.entries(gateway.answers).map(([key, count]) => `${key} ${count}`).join(", "));
    cell(tr, gateway.lastOutcome ? `${gateway.lastOutcome}${gateway.lastReason ? " (" + gateway.lastReason + ")" : ""}`
                                 : "–", gateway.lastOutcome === "sent" ? "" : "bad");
    cell(tr, millis(gateway.lastLatencyMs));
    body.appendChild(tr);
  }
}

function paintOutbox(outbox) {
  const body = $("outbox").querySelector("tbody");
  body.replaceChildren();
  if (!outbox.length) {
    const tr = document.createElement("tr");
    cell(tr, "empty");
    body.appendChild(tr);
  }
  for (const row of outbox) {
    const tr = document.createElement("tr");
    cell(tr, row.service);
    cell(tr, String(row.depth));
    cell(tr, String(row.retrying));
    cell(tr, row.oldestPendingSeconds === undefined ? "–" : `${row.oldestPendingSeconds} s`);
    body.appendChild(tr);
  }
}

// Every process sharing the store, as each last reported itself (the store's view, not this process's).
function paintInstances(instances) {
  const body = $("instances").querySelector("tbody");
  body.replaceChildren();
  for (const instance of instances) {
    const tr = document.createElement("tr");
    tr.dataset.instance = instance.id;
    cell(tr, instance.id);
    cell(tr, String(instance.changes));
    cell(tr, String(instance.signalsSent));
    cell(tr, String(instance.signalsFailed));
    cell(tr, instance.live ? time(instance.seenAt) : `${time(instance.seenAt)} (silent)`, instance.live ? "" : "bad");
    body.appendChild(tr);
  }
}

function logEvent(event) {
  const item = document.createElement("li");
  item.dataset.id = String(event.id);
  item.dataset.type = event.type;
  let text = `${time(event.at)} #${event.id} ${event.type} ${event.account}`;
  if (event.type === "change") text += ` committed state ${event.state}`;
  if (event.type === "signal") {
    text += ` → ${event.device} (${event.service}) ${event.outcome}${event.reason ? " " + event.reason : ""}`
          + ` ${millis(event.latencyMs)}${event.coalesced ? " coalesced" : ""}`;
  }
  if (event.type === "fetch") {
    text += ` fetched to #${event.modseq} by ${event.devices.length ? event.devices.join(", ") : "a session"}`;
    if (event.freshnessMs.length) text += ` freshness ${event.freshnessMs.map(millis).join(", ")}`;
  }
  item.textContent = text;
  const list = $("events");
  list.insertBefore(item, list.firstChild);
  while (list.children.length > EVENTS_SHOWN) list.removeChild(list.lastChild);
}

// Applies one event (`live`: from the stream, so it also counts in the push services' answers and the freshness
// total, which the snapshot already holds for its own events); returns false for one already applied.
function apply(event, live = true) {
  if (state.seen.has(event.id)) return false;
  state.seen.add(event.id);
  state.lastEventId = Math.max(state.lastEventId, event.id);
  document.body.dataset.lastEventId = String(state.lastEventId);
  if (event.type === "change") {
    state.commits.set(event.account, { modseq: event.modseq, at: event.at });
    for (const device of state.devices.values()) {
      if (device.account === event.account) device.commitAt = event.at;
    }
  } else if (event.type === "signal") {
    const device = deviceState(event.device, { account: event.account, service: event.service,
                                               environment: event.environment, app: event.app });
    device.outcome = event.outcome;
    device.latencyMs = event.latencyMs;
    device.signalAt = event.at;
    device.signalModseq = event.modseq;
    device.coalesced = event.coalesced;
    device.deferred = event.outcome === "deferred";
    device.trace = event.trace;
    const commit = state.commits.get(event.account);
    device.commitAt = commit ? commit.at : device.commitAt;
    if (live) {
      const gateway = state.gateways.get(event.service) || { service: event.service, answers: {} };
      const key = event.reason ? `${event.outcome}: ${event.reason}` : event.outcome;
      gateway.answers[key] = (gateway.answers[key] || 0) + 1;
      gateway.lastOutcome = event.outcome;
      gateway.lastReason = event.reason;
      if (event.latencyMs > 0) gateway.lastLatencyMs = event.latencyMs;
      state.gateways.set(event.service, gateway);
    }
  } else if (event.type === "fetch") {
    for (const alias of event.devices) {
      const device = deviceState(alias, { account: event.account });
      device.fetchAt = event.at;
      device.fetchModseq = event.modseq;
    }
    state.samples.push(...event.freshnessMs);
    if (state.samples.length > FRESHNESS_WINDOW) state.samples.splice(0, state.samples.length - FRESHNESS_WINDOW);
    if (live) state.totalSince += event.freshnessMs.length;
  }
  logEvent(event);
  return true;
}

function paintAll() {
  paintDevices();
  paintFreshness();
  paintGateways();
}

async function loadSnapshot() {
  const response = await fetch("/console/snapshot", { credentials: "same-origin" });
  if (response.status === 401) {
    window.location.assign("/console");
    throw new Error("signed out");
  }
  return response.json();
}

async function start() {
  const snapshot = await loadSnapshot();
  state.seen.clear();
  state.devices.clear();
  state.commits.clear();
  state.samples = [];
  state.totalSince = 0;
  state.gateways = new Map(snapshot.gateways.map((gateway) => [gateway.service, gateway]));
  $("events").replaceChildren();
  for (const device of snapshot.devices) {
    deviceState(device.alias, { account: device.account, service: device.service, environment: device.environment,
                                app: device.app, signalAt: device.lastSignalAt, signalModseq: device.lastSignalledModseq,
                                trace: device.trace });
  }
  for (const event of snapshot.events) apply(event, false);
  state.totalBefore = snapshot.freshness.total;
  state.totalSince = 0;
  state.lastEventId = snapshot.lastEventId;
  document.body.dataset.lastEventId = String(state.lastEventId);
  $("store").textContent = `${snapshot.store}, instance ${snapshot.instance}`;
  paintOutbox(snapshot.outbox);
  paintInstances(snapshot.instances);
  paintAll();
  follow(snapshot.lastEventId);
}

function follow(after) {
  if (state.stream) state.stream.close();
  const stream = new EventSource(`/console/events?after=${after}`);
  state.stream = stream;
  const status = $("status");
  stream.onopen = () => { status.dataset.state = "live"; status.textContent = "live"; };
  stream.onerror = () => {
    status.dataset.state = "connecting";
    status.textContent = stream.readyState === EventSource.CLOSED ? "disconnected" : "reconnecting…";
  };
  for (const type of ["change", "signal", "fetch"]) {
    stream.addEventListener(type, (message) => {
      if (apply(JSON.parse(message.data))) paintAll();
    });
  }
  stream.addEventListener("reset", () => { start().catch(() => {}); });
}

// The outbox and the instances are the store's: read again every few seconds.
setInterval(() => {
  loadSnapshot().then((snapshot) => {
    paintOutbox(snapshot.outbox);
    paintInstances(snapshot.instances);
  }).catch(() => {});
}, 3000);

start().catch((failure) => {
  $("status").textContent = `could not load: ${failure.message}`;
});
