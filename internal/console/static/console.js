// weir's web console. One page, no framework: a small router over location.hash renders a page's
// skeleton once (with its forms), and the page's tick fills its live parts from the HTTP API every
// POLL_MS. Byte rates and lag histories are kept here, in memory, from those polls.
"use strict";

const POLL_MS = 2000;
const HISTORY = 90; // points kept per chart: three minutes at POLL_MS
const RECORDS_MAX = 50;

const main = document.getElementById("main");
const rates = new Map(); // topic -> {t, in, out, inRate: [], outRate: []}
const lags = new Map(); // "group" or "group\u0000topic\u0000partition" -> [lag, …]

// api calls the HTTP API and returns its JSON answer; an error answer throws its code and message.
async function api(method, path, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.body = JSON.stringify(body);
    opts.headers["Content-Type"] = "application/json";
  }
  const resp = await fetch(path, opts);
  const text = await resp.text();
  const data = text ? JSON.parse(text) : null;
  if (!resp.ok) {
    throw new Error(data && data.error ? `${data.error.code}: ${data.error.message}` : `HTTP ${resp.status}`);
  }
  return data;
}
const get = (path) => api("GET", path);
const enc = encodeURIComponent;

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
function num(n) {
  return n === undefined || n === null ? "—" : Number(n).toLocaleString("en-US");
}
function bytes(n) {
  if (n === undefined || n === null) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i === 0 ? n.toFixed(0) : n.toFixed(1)} ${units[i]}`;
}
function toast(msg, isError) {
  const t = document.getElementById("toast");
  t.textContent = msg;
  t.className = isError ? "error" : "";
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, isError ? 8000 : 4000);
}
function push(series, v) {
  series.push(v);
  if (series.length > HISTORY) series.shift();
}
function table(head, rows, empty) {
  if (!rows.length) return `<div class="empty">${esc(empty)}</div>`;
  const th = head.map((c) => `<th${c.startsWith("#") ? ' class="num"' : ""}>${esc(c.replace(/^#/, ""))}</th>`).join("");
  return `<table><thead><tr>${th}</tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

// spark draws series (each {cls, values}) as lines on a shared scale over a baseline, the newest
// point at the right; a short history spreads over the width until it has SPAN_MIN points.
const SPAN_MIN = 15;
function spark(series, w = 180, h = 34, fill = false) {
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  const span = Math.min(HISTORY, Math.max(SPAN_MIN, ...series.map((s) => s.values.length)));
  const step = w / (span - 1);
  const paths = series.map((s) => {
    if (s.values.length < 2) return "";
    const x0 = w - (s.values.length - 1) * step;
    const pts = s.values.map((v, i) => `${(x0 + i * step).toFixed(1)},${(h - 2 - (v / max) * (h - 4)).toFixed(1)}`);
    const d = `M${pts.join("L")}` + (fill ? `L${w},${h}L${x0.toFixed(1)},${h}Z` : "");
    return `<path class="${s.cls}" d="${d}"/>`;
  }).join("");
  return `<svg class="spark" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}"><path class="axis" d="M0,${h - 1}H${w}"/>${paths}</svg>`;
}

// sampleTopics lists the topics and turns each one's byte counters into rates since the last sample.
async function sampleTopics() {
  const { topics } = await get("/v1/topics");
  const now = performance.now();
  for (const t of topics) {
    let r = rates.get(t.name);
    if (!r) {
      r = { inRate: [], outRate: [] };
      rates.set(t.name, r);
    } else {
      const dt = (now - r.t) / 1000;
      push(r.inRate, Math.max(0, t.bytes_in_total - r.in) / dt);
      push(r.outRate, Math.max(0, t.bytes_out_total - r.out) / dt);
    }
    Object.assign(r, { t: now, in: t.bytes_in_total, out: t.bytes_out_total });
  }
  return topics;
}
function lastRate(name, dir) {
  const r = rates.get(name);
  const s = r && r[dir];
  return s && s.length ? s[s.length - 1] : 0;
}
function rateChart(name) {
  const r = rates.get(name) || { inRate: [], outRate: [] };
  return spark([{ cls: "in", values: r.inRate }, { cls: "out", values: r.outRate }]);
}

function topicsTable(topics) {
  const rows = topics.map((t) => `<tr data-topic="${esc(t.name)}">
    <td><a href="#/topics/${enc(t.name)}">${esc(t.name)}</a></td>
    <td class="num">${num(t.partitions)}</td><td class="num">${num(t.replication_factor)}</td>
    <td class="num">${bytes(lastRate(t.name, "inRate"))}/s</td><td class="num">${bytes(lastRate(t.name, "outRate"))}/s</td>
    <td>${rateChart(t.name)}</td>
    <td><a href="#/records/${enc(t.name)}">records</a></td></tr>`);
  return table(["Topic", "#Partitions", "#Replicas", "#In", "#Out", "In / out, 3 min", ""], rows, "No topics yet.");
}
const legend = '<span class="legend"><span class="in">━ bytes in</span> &nbsp; <span class="out">━ bytes out</span> (this node)</span>';

const pages = {};

pages.cluster = {
  render() {
    main.innerHTML = `<h1>Cluster <small id="cluster-id"></small></h1>
      <div class="grid" id="stats"></div>
      <div class="cols">
        <section><h2>Brokers</h2><div id="brokers"></div></section>
        <section><h2>Under-replicated partitions</h2><div id="urp"></div></section>
      </div>
      <section><h2>Topics ${legend}</h2><div id="topics"></div></section>`;
  },
  async tick() {
    const [c, topics] = await Promise.all([get("/v1/cluster"), sampleTopics()]);
    document.getElementById("cluster-id").textContent = c.cluster_id;
    const parts = topics.reduce((n, t) => n + t.partitions, 0);
    const inRate = topics.reduce((n, t) => n + lastRate(t.name, "inRate"), 0);
    const outRate = topics.reduce((n, t) => n + lastRate(t.name, "outRate"), 0);
    document.getElementById("stats").innerHTML = [
      [c.brokers.length, "brokers"], [`node ${c.controller}`, "controller"], [topics.length, "topics"],
      [parts, "partitions"], [c.under_replicated.length, "under-replicated"],
      [`${bytes(inRate)}/s`, "bytes in"], [`${bytes(outRate)}/s`, "bytes out"],
    ].map(([v, k]) => `<div class="stat"><b>${esc(v)}</b><span>${esc(k)}</span></div>`).join("");
    document.getElementById("brokers").innerHTML = table(["#Node", "Host", "#Port", "Rack", "Role"],
      c.brokers.map((b) => `<tr><td class="num">${b.node_id}</td><td>${esc(b.host)}</td><td class="num">${b.port}</td>
        <td>${esc(b.rack || "—")}</td><td>${b.node_id === c.controller ? '<span class="pill ok">controller</span>' : "broker"}</td></tr>`),
      "No brokers registered.");
    document.getElementById("urp").innerHTML = table(["Topic", "#Partition", "#Leader", "Replicas", "ISR"],
      c.under_replicated.map((p) => `<tr><td>${esc(p.topic)}</td><td class="num">${p.partition}</td><td class="num">${p.leader}</td>
        <td>${p.replicas.join(", ")}</td><td><span class="pill warn">${p.isr.join(", ") || "none"}</span></td></tr>`),
      "None: every ISR is complete.");
    document.getElementById("topics").innerHTML = topicsTable(topics);
  },
};

pages.topics = {
  render() {
    main.innerHTML = `<h1>Topics</h1>
      <section><h2>Create a topic</h2>
        <form class="inline" id="create">
          <label>Name<input name="name" required pattern="[a-zA-Z0-9._\\-]+" placeholder="orders"></label>
          <label>Partitions<input name="partitions" type="number" min="1" placeholder="default"></label>
          <label>Replication factor<input name="replication_factor" type="number" min="1" placeholder="default"></label>
          <label>Configs<input name="configs" size="36" placeholder="retention.ms=86400000, cleanup.policy=delete"></label>
          <button>Create</button>
        </form></section>
      <section><h2>Topics ${legend}</h2><div id="topics"></div></section>`;
    document.getElementById("create").onsubmit = async (ev) => {
      ev.preventDefault();
      const f = new FormData(ev.target);
      const body = { name: f.get("name").trim(), configs: {} };
      if (f.get("partitions")) body.partitions = Number(f.get("partitions"));
      if (f.get("replication_factor")) body.replication_factor = Number(f.get("replication_factor"));
      for (const kv of f.get("configs").split(",").map((s) => s.trim()).filter(Boolean)) {
        const i = kv.indexOf("=");
        if (i < 1) return toast(`config "${kv}": write key=value`, true);
        body.configs[kv.slice(0, i).trim()] = kv.slice(i + 1).trim();
      }
      try {
        await api("POST", "/v1/topics", body);
        toast(`Topic ${body.name} created.`);
        location.hash = `#/topics/${enc(body.name)}`;
      } catch (e) { toast(e.message, true); }
    };
  },
  async tick() {
    document.getElementById("topics").innerHTML = topicsTable(await sampleTopics());
  },
};

pages.topic = {
  render(name) {
    main.innerHTML = `<h1>${esc(name)} <small><a href="#/records/${enc(name)}">browse records</a></small></h1>
      <div class="grid" id="stats"></div>
      <section><h2>Partitions</h2><div id="partitions"></div></section>
      <div class="cols">
        <section><h2>Throughput ${legend}</h2><div id="chart"></div></section>
        <section><h2>Configs <small class="muted">(set here, others at their defaults)</small></h2><div id="configs"></div>
          <form class="inline" id="alter">
            <label>Config<input name="key" list="config-keys" required placeholder="retention.ms"></label>
            <label>Value<input name="value" placeholder="empty: back to the default"></label>
            <button>Apply</button>
          </form><datalist id="config-keys"></datalist></section>
      </div>`;
    get(`/v1/topics/${enc(name)}/configs`).then(({ configs }) => {
      document.getElementById("config-keys").innerHTML = configs.filter((c) => !c.read_only)
        .map((c) => `<option value="${esc(c.name)}">${esc(c.value ?? "")}</option>`).join("");
    }, () => {});
    document.getElementById("alter").onsubmit = async (ev) => {
      ev.preventDefault();
      const f = new FormData(ev.target);
      const key = f.get("key").trim(), value = f.get("value").trim();
      const body = value === "" ? { delete: [key] } : { set: { [key]: value } };
      try {
        await api("PATCH", `/v1/topics/${enc(name)}/configs`, body);
        toast(value === "" ? `${key} is back to its default.` : `${key} = ${value}`);
        ev.target.reset();
        tick();
      } catch (e) { toast(e.message, true); }
    };
  },
  async tick(name) {
    const [d] = await Promise.all([get(`/v1/topics/${enc(name)}`), sampleTopics()]);
    const hw = d.partitions.reduce((n, p) => n + p.high_watermark - p.log_start_offset, 0);
    const size = d.partitions.reduce((n, p) => n + (p.size_bytes || 0), 0);
    const under = d.partitions.filter((p) => p.isr.length < p.replicas.length).length;
    document.getElementById("stats").innerHTML = [
      [d.partitions.length, "partitions"], [num(hw), "records"], [bytes(size), "size on this node"],
      [under, "under-replicated"], [`${bytes(lastRate(name, "inRate"))}/s`, "bytes in"], [`${bytes(lastRate(name, "outRate"))}/s`, "bytes out"],
    ].map(([v, k]) => `<div class="stat"><b>${esc(v)}</b><span>${esc(k)}</span></div>`).join("");
    document.getElementById("partitions").innerHTML = table(
      ["#Partition", "#Leader", "Replicas", "ISR", "#Log start", "#High watermark", "#Log end", "#Size", ""],
      d.partitions.map((p) => `<tr><td class="num">${p.partition}</td><td class="num">${p.leader}</td>
        <td>${p.replicas.join(", ")}</td>
        <td><span class="pill ${p.isr.length < p.replicas.length ? "warn" : "ok"}">${p.isr.join(", ") || "none"}</span></td>
        <td class="num">${num(p.log_start_offset)}</td><td class="num" data-hw="${p.partition}">${num(p.high_watermark)}</td>
        <td class="num">${num(p.log_end_offset)}</td><td class="num">${bytes(p.size_bytes)}</td>
        <td><a href="#/records/${enc(name)}?partition=${p.partition}&from=offset&at=${Math.max(p.log_start_offset, p.high_watermark - RECORDS_MAX)}">newest records</a></td></tr>`),
      "No partitions.");
    const r = rates.get(name) || { inRate: [], outRate: [] };
    document.getElementById("chart").innerHTML = spark([{ cls: "in", values: r.inRate }, { cls: "out", values: r.outRate }], 520, 90) +
      `<div class="muted">peak in ${bytes(Math.max(0, ...r.inRate))}/s, out ${bytes(Math.max(0, ...r.outRate))}/s over the last ${r.inRate.length * POLL_MS / 1000} s</div>`;
    const cfg = Object.entries(d.configs).sort();
    document.getElementById("configs").innerHTML = table(["Config", "Value"],
      cfg.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`), "Every config is at its default.");
  },
};

// describeGroups describes groups and adds each one's total lag to its history.
async function describeGroups(names) {
  const ds = await Promise.all(names.map((g) => get(`/v1/groups/${enc(g)}`).catch(() => null)));
  for (const d of ds.filter(Boolean)) {
    if (!lags.has(d.group)) lags.set(d.group, []);
    push(lags.get(d.group), d.total_lag);
    for (const o of d.offsets) {
      const k = `${d.group}\u0000${o.topic}\u0000${o.partition}`;
      if (!lags.has(k)) lags.set(k, []);
      push(lags.get(k), o.lag);
    }
  }
  return ds;
}
function statePill(s) {
  const cls = { Stable: "ok", Empty: "", Dead: "bad" }[s] ?? "warn";
  return `<span class="pill ${cls}">${esc(s)}</span>`;
}

pages.groups = {
  render() {
    main.innerHTML = `<h1>Consumer groups</h1><section><div id="groups"></div></section>`;
  },
  async tick() {
    const { groups } = await get("/v1/groups");
    const ds = await describeGroups(groups.slice(0, 50).map((g) => g.group));
    document.getElementById("groups").innerHTML = table(["Group", "State", "#Members", "#Partitions", "#Lag", "Lag, 3 min"],
      groups.map((g, i) => {
        const d = ds[i];
        return `<tr><td><a href="#/groups/${enc(g.group)}">${esc(g.group)}</a></td><td>${statePill(g.state)}</td>
          <td class="num">${d ? d.members.length : "—"}</td><td class="num">${d ? d.offsets.length : "—"}</td>
          <td class="num" data-group-lag="${esc(g.group)}">${d ? num(d.total_lag) : "—"}</td>
          <td>${spark([{ cls: "lag", values: lags.get(g.group) || [] }], 180, 34, true)}</td></tr>`;
      }), "No consumer groups.");
  },
};

pages.group = {
  render(name) {
    main.innerHTML = `<h1>${esc(name)} <small id="group-state"></small></h1>
      <div class="grid" id="stats"></div>
      <section><h2>Lag per partition</h2><div id="offsets"></div></section>
      <section><h2>Members</h2><div id="members"></div></section>
      <section><h2>Reset offsets <small class="muted">(the group must have no members)</small></h2>
        <form class="inline" id="reset">
          <label>Topic<select name="topic" id="reset-topic" required></select></label>
          <label>To<select name="to"><option>earliest</option><option>latest</option><option>offset</option><option>timestamp</option></select></label>
          <label>Offset or time<input name="at" placeholder="offset, or 2026-01-01T00:00"></label>
          <button class="danger">Reset offsets…</button>
        </form></section>`;
    document.getElementById("reset").onsubmit = async (ev) => {
      ev.preventDefault();
      const f = new FormData(ev.target);
      const body = { topic: f.get("topic"), to: f.get("to"), dry_run: true };
      const at = f.get("at").trim();
      if (body.to === "offset") body.offset = Number(at);
      if (body.to === "timestamp") body.timestamp = /^\d+$/.test(at) ? Number(at) : Date.parse(at);
      if ((body.to === "offset" && !/^\d+$/.test(at)) || (body.to === "timestamp" && !Number.isFinite(body.timestamp))) {
        return toast(`give the ${body.to} to reset to`, true);
      }
      try {
        const plan = await api("POST", `/v1/groups/${enc(name)}/reset-offsets`, body);
        const rows = plan.offsets.map((o) => `<tr><td class="num">${o.partition}</td><td class="num">${num(o.offset)}</td></tr>`);
        const ok = await confirmDialog(`Reset ${name} on ${body.topic}?`,
          `<p>The group's committed offsets become:</p>${table(["#Partition", "#New offset"], rows, "No partitions.")}`);
        if (!ok) return;
        await api("POST", `/v1/groups/${enc(name)}/reset-offsets`, { ...body, dry_run: false });
        toast(`Offsets of ${name} on ${body.topic} reset to ${body.to}.`);
        tick();
      } catch (e) { toast(e.message, true); }
    };
  },
  async tick(name) {
    const [d] = await describeGroups([name]);
    if (!d) throw new Error(`group ${name} does not exist`);
    document.getElementById("group-state").innerHTML = `${statePill(d.state)} ${esc(d.protocol || "")}`;
    document.getElementById("stats").innerHTML = [
      [d.members.length, "members"], [num(d.total_lag), "total lag"], [`node ${d.coordinator}`, "coordinator"],
    ].map(([v, k]) => `<div class="stat"><b>${esc(v)}</b><span>${esc(k)}</span></div>`).join("");
    document.getElementById("offsets").innerHTML = table(
      ["Topic", "#Partition", "#Committed", "#High watermark", "#Lag", "Lag, 3 min", "Member"],
      d.offsets.map((o) => `<tr><td><a href="#/topics/${enc(o.topic)}">${esc(o.topic)}</a></td><td class="num">${o.partition}</td>
        <td class="num">${num(o.committed)}</td><td class="num">${num(o.high_watermark)}</td>
        <td class="num" data-lag="${esc(o.topic)}/${o.partition}">${num(o.lag)}</td>
        <td>${spark([{ cls: "lag", values: lags.get(`${name}\u0000${o.topic}\u0000${o.partition}`) || [] }], 180, 34, true)}</td>
        <td class="muted">${esc(o.member_id || "—")}</td></tr>`),
      "The group has no committed offsets.");
    document.getElementById("members").innerHTML = table(["Member", "Client", "Host", "Assignment"],
      d.members.map((m) => `<tr><td>${esc(m.member_id)}</td><td>${esc(m.client_id)}</td><td>${esc(m.client_host)}</td>
        <td>${m.assignment.map((a) => `${esc(a.topic)}: ${a.partitions.join(", ")}`).join("; ") || "—"}</td></tr>`),
      "No members.");
    const sel = document.getElementById("reset-topic");
    const topics = [...new Set(d.offsets.map((o) => o.topic))];
    if (sel.options.length !== topics.length) {
      sel.innerHTML = topics.map((t) => `<option>${esc(t)}</option>`).join("");
    }
  },
};

function confirmDialog(title, html) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-body").innerHTML = html;
  dlg.returnValue = "";
  dlg.showModal();
  return new Promise((resolve) => dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true }));
}

// decode shows base64 bytes as text, JSON (pretty-printed when they parse) or hex.
function decode(b64, as) {
  if (b64 === undefined) return '<span class="muted">null</span>';
  const raw = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  if (as === "hex") {
    return esc(Array.from(raw, (b) => b.toString(16).padStart(2, "0")).join(" ").replace(/((?:\S\S ){16})/g, "$1\n"));
  }
  const text = new TextDecoder().decode(raw);
  if (as === "json") {
    try { return esc(JSON.stringify(JSON.parse(text), null, 2)); } catch { return `<span title="not JSON: shown as text">${esc(text)}</span>`; }
  }
  return esc(text);
}

pages.records = {
  render(topic, q) {
    main.innerHTML = `<h1>Records</h1>
      <section><form class="inline" id="browse">
        <label>Topic<select name="topic" id="browse-topic" required></select></label>
        <label>Partition<input name="partition" type="number" min="0" value="${esc(q.get("partition") || 0)}"></label>
        <label>From<select name="from">${["earliest", "offset", "timestamp", "latest"].map((f) =>
          `<option${f === (q.get("from") || "earliest") ? " selected" : ""}>${f}</option>`).join("")}</select></label>
        <label>Offset or time<input name="at" value="${esc(q.get("at") || "")}" placeholder="42, or 2026-01-01T00:00"></label>
        <label>Show as<select name="as">${["text", "json", "hex"].map((a) =>
          `<option${a === (q.get("as") || "text") ? " selected" : ""}>${a}</option>`).join("")}</select></label>
        <button>Read</button>
      </form></section>
      <section><div id="records" class="records"><div class="empty">Pick a topic and a partition.</div></div></section>`;
    const form = document.getElementById("browse");
    form.onsubmit = (ev) => {
      ev.preventDefault();
      const f = new FormData(form);
      const p = new URLSearchParams({ partition: f.get("partition"), from: f.get("from"), at: f.get("at"), as: f.get("as") });
      location.hash = `#/records/${enc(f.get("topic"))}?${p}`;
    };
    get("/v1/topics").then(({ topics }) => {
      document.getElementById("browse-topic").innerHTML = topics.map((t) =>
        `<option${t.name === topic ? " selected" : ""}>${esc(t.name)}</option>`).join("");
    }, (e) => toast(e.message, true));
    if (topic) this.read(topic, q);
  },
  async read(topic, q) {
    const out = document.getElementById("records");
    const from = q.get("from") || "earliest", at = (q.get("at") || "").trim(), as = q.get("as") || "text";
    const params = new URLSearchParams({ max: RECORDS_MAX, encoding: "base64" });
    if (from === "timestamp") params.set("timestamp", /^\d+$/.test(at) ? at : Date.parse(at));
    else if (from === "offset") params.set("offset", at || "0");
    else params.set("offset", from);
    try {
      const path = `/v1/topics/${enc(topic)}/partitions/${enc(q.get("partition") || 0)}/records?${params}`;
      const r = await get(path);
      const rows = r.records.map((rec) => `<tr><td class="num">${rec.offset}</td>
        <td class="muted">${new Date(rec.timestamp).toISOString().replace("T", " ").replace("Z", "")}</td>
        <td class="data">${decode(rec.key_b64, as)}</td><td class="data">${decode(rec.value_b64, as)}</td>
        <td class="data">${(rec.headers || []).map((hd) => `${esc(hd.key)}=${esc(hd.value ?? hd.value_b64)}`).join("\n")}</td></tr>`);
      const next = new URLSearchParams(q);
      next.set("from", "offset");
      next.set("at", r.next_offset);
      out.innerHTML = `<p class="muted">Log start ${num(r.log_start_offset)}, high watermark ${num(r.high_watermark)}.
        ${r.next_offset < r.high_watermark ? `<a href="#/records/${enc(topic)}?${next}">next records from offset ${num(r.next_offset)} →</a>` : "These are the newest records."}</p>` +
        table(["#Offset", "Time (UTC)", "Key", "Value", "Headers"], rows, "No records there yet.");
    } catch (e) {
      out.innerHTML = `<div class="empty">${esc(e.message)}</div>`;
    }
  },
};

// route maps location.hash to a page and its arguments.
function route() {
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const q = new URLSearchParams(query || "");
  switch (parts[0]) {
    case "topics": return parts[1] ? ["topic", "topics", parts[1], q] : ["topics", "topics"];
    case "groups": return parts[1] ? ["group", "groups", parts[1], q] : ["groups", "groups"];
    case "records": return ["records", "records", parts[1], q];
    default: return ["cluster", "cluster"];
  }
}

let current = null;
let timer = null;

// tick refreshes the current page's live parts, then schedules the next refresh.
async function tick() {
  clearTimeout(timer);
  const page = current;
  const live = document.getElementById("live");
  if (pages[page.name].tick) {
    try {
      await pages[page.name].tick(...page.args);
      live.className = "";
      live.title = `updated ${new Date().toLocaleTimeString()}`;
      page.failed = false;
    } catch (e) {
      live.className = "stale";
      live.title = e.message;
      if (!page.failed) toast(e.message, true);
      page.failed = true;
    }
  }
  if (page === current) timer = setTimeout(tick, POLL_MS);
}

function show() {
  const [name, nav, ...args] = route();
  current = { name, args };
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.nav === nav);
  pages[name].render(...args);
  tick();
}

window.addEventListener("hashchange", show);
show();
