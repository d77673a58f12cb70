// The Node client ali-ons as an interop column: `node node.js OP PARAMS_JSON` runs one cell and
// prints one JSON event per line (see interop/scenarios.py for what the runner expects).
'use strict';
const crypto = require('crypto');
const path = require('path');
const { Producer, Consumer, Message } = require(path.join(__dirname, '..', 'node', 'node_modules', 'ali-ons'));

const emit = (kind, fields) => console.log(JSON.stringify(Object.assign({ kind }, fields)));
const quietLogger = { info() {}, warn() {}, debug() {}, error() {} };
const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));
const bodies = (specs) => specs.map((m) => m.body);

async function until(done, seconds) {
  const deadline = Date.now() + seconds * 1000;
  while (!done() && Date.now() < deadline) await sleep(0.1);
}

// The body of a spec: interop/scenarios.py body_bytes (label, '#', generated filler up to size).
const ALPHABET = Buffer.from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/');
function bodyBytes(spec) {
  const label = Buffer.from(spec.body, 'utf8');
  if (spec.size === undefined) return label;
  const n = spec.size - label.length - 1;
  const filler = Buffer.alloc(n);
  let x = 2463534242;
  for (let i = 0; i < n; i++) {
    if (spec.fill === 'repeat') {
      filler[i] = ALPHABET[i % 64];
    } else {
      x = (x ^ (x << 13)) >>> 0;
      x = (x ^ (x >>> 17)) >>> 0;
      x = (x ^ (x << 5)) >>> 0;
      filler[i] = ALPHABET[x % 64];
    }
  }
  return Buffer.concat([label, Buffer.from('#'), filler]);
}

function message(p, spec) {
  const msg = new Message(p.topic, spec.tags, bodyBytes(spec));
  msg.keys = spec.keys;
  for (const [name, value] of Object.entries(spec.props || {})) msg.properties[name] = value;
  if (spec.delay) msg.delayTimeLevel = spec.delay;
  return msg;
}

// The cell's ACL keys (params.acl): ali-ons signs every request with them as AclClientRPCHook does.
const keys = (p) => (p.acl ? { accessKeyId: p.acl.access_key, accessKeySecret: p.acl.secret_key } : {});

async function producer(p, extra = {}) {
  const prod = new Producer(Object.assign({ nameSrv: p.namesrv, producerGroup: p.producer_group, httpclient: {}, logger: quietLogger },
    keys(p), extra));
  await prod.ready();
  return prod;
}

function sent(spec, at, result) {
  emit('sent', { body: spec.body, at, status: result ? result.sendStatus : null, msg_id: result ? result.msgId : null });
}

// "sync" awaits each send; "async" has every send in flight at once (Node has no blocking send).
async function sendAll(prod, p, mode = 'sync', key = 'messages') {
  if (key !== 'messages') p = Object.assign({}, p, { messages: p[key] });
  if (mode === 'async') {
    const at = Date.now() / 1000;
    const results = await Promise.all(p.messages.map((spec) => prod.send(message(p, spec))));
    p.messages.forEach((spec, i) => sent(spec, at, results[i]));
    return;
  }
  for (const spec of p.messages) {
    const at = Date.now() / 1000;
    sent(spec, at, await prod.send(message(p, spec)));
  }
}

// Push consumers of one group; fail(msg) true makes the handler throw (ali-ons then sends it back).
class Members {
  constructor(p, count = 1, { broadcast = false, fail = () => false, maxReconsumeTimes = 16, base = 0, group = p.group, topic = p.topic } = {}) {
    this.events = [];
    const names = [...new Set((p.messages || []).flatMap((m) => Object.keys(m.props || {})))];
    const expression = p.expression_type === 'SQL92' ? { expressionType: 'SQL92', subString: p.expression } : (p.expression || '*');
    this.consumers = [];
    for (let member = base; member < base + count; member++) {
      const consumer = new Consumer(Object.assign({
        nameSrv: p.namesrv, consumerGroup: group, httpclient: {}, logger: quietLogger, isBroadcast: broadcast,
        instanceName: `${group}-${member}`, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET', maxReconsumeTimes,
      }, keys(p)));
      consumer.on('error', () => {});
      consumer.subscribe(topic, expression, async (msg) => {
        const cut = msg.body.indexOf('#');
        const event = { body: (cut < 0 ? msg.body : msg.body.subarray(0, cut)).toString('utf8'), tags: msg.tags,
          keys: (msg.keys || '').split(' ').filter(Boolean), topic: msg.topic, queue_id: msg.queueId,
          queue_offset: msg.queueOffset, reconsume: msg.reconsumeTimes, member, at: Date.now() / 1000 };
        if (msg.body.length > 1024) {
          event.size = msg.body.length;
          event.sha256 = crypto.createHash('sha256').update(msg.body).digest('hex');
        }
        if (names.length) event.props = Object.fromEntries(names.map((n) => [n, msg.properties[n] === undefined ? null : msg.properties[n]]));
        emit('recv', event);
        this.events.push(event);
        if (fail(msg)) throw new Error('fail this delivery');
      });
      this.consumers.push(consumer);
    }
  }

  has(want, member = null, reconsume = 0) {
    const got = new Set(this.events.filter((e) => (member === null || e.member === member) && e.reconsume >= reconsume).map((e) => e.body));
    return want.every((b) => got.has(b));
  }

  async start() { await Promise.all(this.consumers.map((c) => c.ready())); }

  async stop() { await Promise.all(this.consumers.map((c) => c.close())); }
}

const ops = {
  // One send per spec, no retries, no consumer: each answer is a "sent" or a "refused" event.
  async refused_send(p) {
    let prod;
    try {
      prod = await producer(p, { retryTimesWhenSendFailed: 0 });
    } catch (err) { // its start registers with the broker: a refusal can come here already
      for (const spec of p.messages) emit('refused', { body: spec.body, error: String(err && err.message || err) });
      return;
    }
    for (const spec of p.messages) {
      const at = Date.now() / 1000;
      try {
        sent(spec, at, await prod.send(message(p, spec)));
      } catch (err) {
        emit('refused', { body: spec.body, error: String(err && err.message || err) });
      }
    }
    await prod.close().catch(() => {}); // unregistering is refused too with wrong keys
  },

  async send(p) {
    const prod = await producer(p);
    await sendAll(prod, p, p.mode);
    const members = new Members(p);
    await members.start();
    await until(() => members.has(bodies(p.messages)), p.wait);
    await members.stop();
    await prod.close();
  },

  async consume(p) {
    const members = new Members(p, p.members, { broadcast: p.model === 'BROADCASTING' });
    await members.start();
    await sleep(p.settle);
    const prod = await producer(p);
    await sendAll(prod, p);
    const want = bodies(p.expect || p.messages);
    const who = p.model === 'BROADCASTING' ? [...Array(p.members).keys()] : [null];
    await until(() => who.every((m) => members.has(want, m)), p.wait);
    await sleep(p.linger);
    await members.stop();
    await prod.close();
  },

  async delay(p) {
    const members = new Members(p);
    await members.start();
    await sleep(p.settle);
    const prod = await producer(p);
    await sendAll(prod, p);
    await until(() => members.has(bodies(p.messages)), p.wait + Math.max(...p.messages.map((m) => p.levels[m.delay - 1])));
    await members.stop();
    await prod.close();
  },

  async retry(p) {
    const prod = await producer(p);
    await sendAll(prod, p);
    const members = new Members(p, 1, { fail: (msg) => msg.reconsumeTimes === 0 });
    await members.start();
    await until(() => members.has(bodies(p.messages), null, 1), p.wait);
    await members.stop();
    await prod.close();
  },

  async dlq(p) {
    const prod = await producer(p);
    await sendAll(prod, p);
    emit('config', { max_reconsume: p.max_reconsume });
    const members = new Members(p, 1, { fail: () => true, maxReconsumeTimes: p.max_reconsume });
    await members.start();
    await until(() => members.has(bodies(p.messages), null, p.max_reconsume), p.wait);
    await sleep(p.linger);
    await members.stop();
    await prod.close();
  },

  async dlq_consume(p) {
    await ops.dlq(p);
    const reader = new Members(p, 1, { base: 1, group: `${p.group}_dlq`, topic: `%DLQ%${p.group}` });
    await reader.start();
    await until(() => reader.has(bodies(p.messages), 1), p.wait);
    await reader.stop();
  },

  async restart(p) {
    const before = new Members(p);
    await before.start();
    await sleep(p.settle);
    const prod = await producer(p);
    await sendAll(prod, p);
    await until(() => before.has(bodies(p.messages), 0), p.wait);
    await sleep(p.linger);
    await before.stop();
    await sendAll(prod, p, 'sync', 'later');
    const after = new Members(p, 1, { base: 1 });
    await after.start();
    await until(() => after.has(bodies(p.later), 1), p.wait);
    await sleep(p.linger);
    await after.stop();
    await prod.close();
  },
};

const [op, raw] = process.argv.slice(2);
ops[op](JSON.parse(raw)).then(
  () => process.exit(0),
  (err) => { emit('error', { error: String(err && err.message || err) }); process.exit(0); },
);
