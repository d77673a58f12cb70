// rmqtx console: one static page over the JSON endpoints under /api (no build step, no libraries).
"use strict";

const state = { whoami: null };
const $ = (sel, root = document) => root.querySelector(sel);

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
function num(n) { return typeof n === "number" ? n.toLocaleString("en-US") : esc(n); }
function when(ms) { return ms > 0 ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "-"; }
function bytes(n) {
  if (!(n >= 0)) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function notice(text, ok) {
  const box = $("#notice");
  box.hidden = !text;
  box.textContent = text || "";
  box.className = ok ? "ok" : "err";
}

async function api(path, params) {
  const url = new URL(`api/${path}`, location.href);
  for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== undefined && v !== null) url.searchParams.set(k, v);
  const res = await fetch(url);
  const data = await res.json();
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}

async function post(path, body) {
  const headers = { "content-type": "application/json" };
  const ak = $("#access-key").value.trim(), sk = $("#secret-key").value;
  if (ak && sk) { headers["x-access-key"] = ak; headers["x-secret-key"] = sk; }
  const res = await fetch(new URL(`api/${path}`, location.href), { method: "POST", headers, body: JSON.stringify(body) });
  const data = await res.json();
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}

function table(columns, rows, rowAttrs) {
  const head = columns.map((c) => `<th class="${c.num ? "num" : ""}">${esc(c.title)}</th>`).join("");
  const body = rows.map((r, i) => `<tr ${rowAttrs ? rowAttrs(r, i) : ""}>` + columns.map((c) =>
    `<td class="${c.num ? "num" : ""}">${c.html ? c.html(r) : c.num ? num(c.get(r)) : esc(c.get(r))}</td>`).join("") + "</tr>").join("");
  return `<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

function form(id, fields, button, danger) {
  const inputs = fields.map((f) => `<label>${esc(f.label)}<${f.textarea ? "textarea rows=3 cols=40" : "input"} name="${f.name}" ` +
    `value="${esc(f.value ?? "")}" ${f.size ? `size="${f.size}"` : ""} placeholder="${esc(f.placeholder || "")}">${f.textarea ? "</textarea>" : ""}</label>`).join("");
  return `<form class="inline" id="${id}">${inputs}<button type="submit" class="${danger ? "danger" : ""}">${esc(button)}</button></form>`;
}

function onSubmit(id, handler) {
  const el = document.getElementById(id);
  el.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const values = Object.fromEntries(new FormData(el).entries());
    try { await handler(values); } catch (err) { notice(err.message, false); }
  });
}

function messageCard(m, extra) {
  const props = Object.entries(m.properties || {}).map(([k, v]) => `${esc(k)}=${esc(v)}`).join("  ");
  return `<div class="msg" data-msgid="${esc(m.msgId)}">
    <div><b>${esc(m.msgId)}</b> <span class="muted">offsetMsgId ${esc(m.offsetMsgId)}</span> ${extra || ""}</div>
    <div class="muted">topic ${esc(m.topic)} · queue ${m.queueId} · offset ${m.queueOffset} · tags ${esc(m.tags || "-")} · keys ${esc(m.keys || "-")}
      · stored ${when(m.storeTimestamp)} · born ${esc(m.bornHost)} · reconsume ${m.reconsumeTimes} · ${m.bodySize} bytes</div>
    <div class="muted">properties: ${props}</div>
    <div>text:</div><pre class="body-text">${m.bodyText === null ? "<i>not UTF-8</i>" : esc(m.bodyText)}</pre>
    <div>hex:</div><pre class="body-hex">${esc(m.bodyHex.replace(/(..)/g, "$1 ").trim())}</pre>
  </div>`;
}

// -- pages ------------------------------------------------------------------------------------------
const pages = {
  async cluster(main) {
    const data = await api("cluster");
    const b = data.broker;
    main.innerHTML = `<h2>Broker ${esc(b.brokerName)} <span class="pill">${esc(b.role)}</span></h2>
      <div class="cards">
        ${[["Cluster", esc(b.cluster)], ["Version", esc(b.version)], ["Address", esc(b.address)], ["HA address", esc(b.haAddress)],
          ["Put TPS (1 min)", num(b.putTps)], ["Get TPS (1 min)", num(b.getTps)], ["Messages put", num(b.putTotal)], ["Messages got", num(b.getTotal)],
          ["Disk used", `${(b.disk.ratio * 100).toFixed(1)} %`], ["Store on disk", bytes(b.disk.storeBytes)], ["Disk free", bytes(b.disk.free)],
          ["Commit log", `${num(b.commitLogMinOffset)} – ${num(b.commitLogMaxOffset)}`], ["Topics", num(b.topics)], ["Groups", num(b.groups)],
          ["Consumers online", num(b.consumersOnline)], ["Producers online", num(b.producersOnline)], ["Up", esc(b.runtime.replace(/[\[\]]/g, "").replace(/ ?0 days, /, "").trim())],
          ["NameServer", esc(b.namesrvAddr || "-")]].map(([k, v]) => `<div class="card"><small>${k}</small><b>${v}</b></div>`).join("")}
      </div>
      <h2>Brokers the NameServer knows</h2>
      ${table([{ title: "Cluster", get: (r) => r.cluster }, { title: "Broker", get: (r) => r.brokerName }, { title: "Id", get: (r) => r.brokerId, num: true },
        { title: "Address", get: (r) => r.address }, { title: "Role", get: (r) => r.role }, { title: "", get: (r) => (r.self ? "this broker" : "") }], data.brokers)}
      ${data.namesrvError ? `<p class="muted">NameServer: ${esc(data.namesrvError)}</p>` : ""}
      <h2>Runtime info</h2>
      ${table([{ title: "Key", get: (r) => r[0] }, { title: "Value", get: (r) => r[1] }], Object.entries(b.runtimeInfo).sort())}`;
  },

  async topics(main, args) {
    const data = await api("topics");
    const showSystem = args.get("system") === "1";
    const rows = data.topics.filter((t) => showSystem || !t.system);
    main.innerHTML = `<h2>Topics</h2>
      <p><label><input type="checkbox" id="show-system" ${showSystem ? "checked" : ""}> show system, retry and DLQ topics</label></p>
      ${table([{ title: "Topic", html: (t) => `<a href="#topics?topic=${encodeURIComponent(t.topic)}${showSystem ? "&system=1" : ""}">${esc(t.topic)}</a>` },
        { title: "Read queues", get: (t) => t.readQueueNums, num: true }, { title: "Write queues", get: (t) => t.writeQueueNums, num: true },
        { title: "Perm", get: (t) => t.perm, num: true }, { title: "Messages", get: (t) => t.messages, num: true },
        { title: "Max offset (sum)", get: (t) => t.maxOffset, num: true }, { title: "TPS", get: (t) => t.tps, num: true },
        { title: "Groups", get: (t) => t.groups.join(", ") }], rows, (t) => `data-topic="${esc(t.topic)}"`)}
      <h2>Create or update a topic</h2>
      ${form("topic-form", [{ label: "Topic", name: "topic", size: 24 }, { label: "Read queues", name: "readQueueNums", value: 4, size: 4 },
        { label: "Write queues", name: "writeQueueNums", value: 4, size: 4 }, { label: "Perm", name: "perm", value: 6, size: 3 }], "Save topic")}
      <div id="topic-detail"></div>`;
    $("#show-system").addEventListener("change", (ev) => { location.hash = ev.target.checked ? "#topics?system=1" : "#topics"; });
    onSubmit("topic-form", async (v) => {
      const r = await post("topic", { topic: v.topic, readQueueNums: +v.readQueueNums, writeQueueNums: +v.writeQueueNums, perm: +v.perm });
      notice(`topic ${r.topic} ${r.created ? "created" : "updated"}`, true);
      await render();
    });
    const name = args.get("topic");
    if (name) {
      const t = await api("topic", { topic: name });
      $("#topic-detail").innerHTML = `<h2>Topic ${esc(t.topic)} <span class="pill">${esc(t.kind)}</span></h2>
        ${table([{ title: "Queue", get: (q) => q.queueId, num: true }, { title: "Min offset", get: (q) => q.minOffset, num: true },
          { title: "Max offset", get: (q) => q.maxOffset, num: true }, { title: "Last stored", get: (q) => when(q.lastUpdateTimestamp) }], t.queues)}
        <p><button class="danger" id="delete-topic">Delete topic ${esc(t.topic)}</button></p>`;
      $("#delete-topic").addEventListener("click", async () => {
        if (!confirm(`Delete topic ${t.topic}?`)) return;
        try { await post("topic/delete", { topic: t.topic }); notice(`topic ${t.topic} deleted`, true); location.hash = "#topics"; }
        catch (err) { notice(err.message, false); }
      });
    }
  },

  async groups(main, args) {
    const data = await api("groups");
    main.innerHTML = `<h2>Consumer groups</h2>
      ${table([{ title: "Group", html: (g) => `<a href="#groups?group=${encodeURIComponent(g.group)}">${esc(g.group)}</a>` },
        { title: "Online", html: (g) => `<span class="pill ${g.online ? "on" : ""}">${g.connections.length}</span>` },
        { title: "Model", get: (g) => g.messageModel }, { title: "Type", get: (g) => g.consumeType },
        { title: "Client versions", get: (g) => g.versions.join(", ") }, { title: "Lag", get: (g) => g.lag, num: true },
        { title: "TPS", get: (g) => g.tps, num: true }, { title: "Topics", get: (g) => Object.keys(g.subscriptions).join(", ") }],
        data.groups, (g) => `data-group="${esc(g.group)}"`)}
      <div id="group-detail"></div>`;
    const name = args.get("group");
    if (!name) return;
    const g = await api("group", { group: name });
    const topics = [...new Set(g.queues.map((q) => q.topic))];
    $("#group-detail").innerHTML = `<h2>Group ${esc(g.group)}</h2>
      <h2>Connections</h2>
      ${table([{ title: "Client id", get: (c) => c.clientId }, { title: "Address", get: (c) => c.clientAddr },
        { title: "Language", get: (c) => c.language }, { title: "Version", get: (c) => c.version, num: true }], g.connections)}
      <h2>Per-queue lag</h2>
      ${table([{ title: "Topic", get: (q) => q.topic }, { title: "Queue", get: (q) => q.queueId, num: true },
        { title: "Broker offset", get: (q) => q.brokerOffset, num: true }, { title: "Consumer offset", get: (q) => q.consumerOffset, num: true },
        { title: "Lag", get: (q) => q.lag, num: true }, { title: "Oldest unconsumed age (ms)", get: (q) => q.latencyMs, num: true },
        { title: "Last consumed stored at", get: (q) => when(q.lastTimestamp) }], g.queues, (q) => `data-queue="${esc(q.topic)}:${q.queueId}"`)}
      <h2>Reset offset</h2>
      <form class="inline" id="reset-form">
        <label>Topic<select name="topic">${topics.map((t) => `<option>${esc(t)}</option>`).join("")}</select></label>
        <label>To<select name="mode"><option value="-1">the end (skip all)</option><option value="0">the start</option><option value="time">a time</option></select></label>
        <label>Time (UTC, yyyy-mm-dd hh:mm:ss)<input name="time" size="20"></label>
        <button type="submit" class="danger">Reset offset</button>
      </form>
      ${g.dlqTopic ? `<p><a href="#dlq?group=${encodeURIComponent(g.group)}">dead letters of ${esc(g.group)}</a></p>` : ""}`;
    onSubmit("reset-form", async (v) => {
      const timestamp = v.mode === "time" ? Date.parse(v.time.replace(" ", "T") + "Z") : +v.mode;
      if (Number.isNaN(timestamp)) throw new Error("the time does not parse");
      const r = await post("group/reset", { group: g.group, topic: v.topic, timestamp });
      notice(`offsets of ${r.group} on ${r.topic} reset${r.online ? " (pushed to the online consumers)" : ""}: ${JSON.stringify(r.offsets)}`, true);
      await render();
    });
  },

  async messages(main, args) {
    main.innerHTML = `<h2>Find messages</h2>
      ${form("by-id", [{ label: "Message id (offsetMsgId or msgId)", name: "id", size: 36 }, { label: "Topic (for a client msgId)", name: "topic", size: 18 }], "Find by id")}
      ${form("by-key", [{ label: "Topic", name: "topic", size: 18 }, { label: "Key", name: "key", size: 24 }], "Find by key")}
      ${form("by-offset", [{ label: "Topic", name: "topic", size: 18 }, { label: "Queue", name: "queueId", value: 0, size: 3 },
        { label: "Offset", name: "offset", value: 0, size: 8 }, { label: "Count", name: "count", value: 1, size: 3 }], "Find by queue offset")}
      <div id="results"></div>`;
    const show = (data) => {
      $("#results").innerHTML = `<h2>${data.messages.length} message(s)</h2>` + data.messages.map((m) => messageCard(m)).join("");
    };
    onSubmit("by-id", async (v) => show(await api("messages", { by: "id", ...v })));
    onSubmit("by-key", async (v) => show(await api("messages", { by: "key", ...v })));
    onSubmit("by-offset", async (v) => show(await api("messages", { by: "offset", ...v })));
  },

  async dlq(main, args) {
    const data = await api("dlq");
    const group = args.get("group") || data.groups[0] || "";
    main.innerHTML = `<h2>Dead letters</h2>
      <p>Groups with a DLQ: ${data.groups.map((g) => `<a href="#dlq?group=${encodeURIComponent(g)}">${esc(g)}</a>`).join(" · ") || "none"}</p>
      <div id="dlq-list"></div>`;
    if (!group) return;
    const page = await api("dlq", { group });
    const messages = page.queues.flatMap((q) => q.messages);
    $("#dlq-list").innerHTML = `<h2>${esc(page.topic)}: ${messages.length} shown</h2>` + messages.map((m) =>
      messageCard(m, `<button class="small resend" data-offset-msg-id="${esc(m.offsetMsgId)}">Resend to ${esc(group)}</button>`)).join("");
    for (const button of main.querySelectorAll("button.resend")) {
      button.addEventListener("click", async () => {
        try {
          const r = await post("dlq/resend", { group, offsetMsgId: button.dataset.offsetMsgId });
          notice(`resent to ${r.topic} as ${r.offsetMsgId}`, true);
        } catch (err) { notice(err.message, false); }
      });
    }
  },

  async send(main) {
    main.innerHTML = `<h2>Send a test message</h2>
      ${form("send-form", [{ label: "Topic", name: "topic", size: 20 }, { label: "Tags", name: "tags", size: 10 },
        { label: "Keys (space separated)", name: "keys", size: 16 }, { label: "Body", name: "body", textarea: true }], "Send")}
      <div id="send-result"></div>`;
    onSubmit("send-form", async (v) => {
      const r = await post("send", v);
      notice(`sent: msgId ${r.msgId}`, true);
      $("#send-result").innerHTML = table([{ title: "Field", get: (x) => x[0] }, { title: "Value", get: (x) => x[1] }], Object.entries(r));
    });
  },
};

async function render() {
  const [name, query] = (location.hash.slice(1) || "cluster").split("?");
  const page = pages[name] ? name : "cluster";
  for (const a of document.querySelectorAll("nav a[data-page]")) a.classList.toggle("active", a.dataset.page === page);
  const main = $("#page");
  try {
    await pages[page](main, new URLSearchParams(query || ""));
    main.dataset.page = page;  // tests wait for this: the page has its data
  } catch (err) {
    notice(err.message, false);
    main.dataset.page = page;
  }
}

async function boot() {
  state.whoami = await api("whoami");
  $("#broker-title").textContent = `${state.whoami.cluster} / ${state.whoami.brokerName}`;
  $("#admin-state").textContent = state.whoami.adminEnable ? (state.whoami.aclEnable ? "admin (ACL on):" : "admin actions on") : "read only";
  $("#admin-creds").hidden = !(state.whoami.adminEnable && state.whoami.aclEnable);
  window.addEventListener("hashchange", () => { notice(""); $("#page").dataset.page = ""; render(); });
  await render();
}

boot();
