'use strict';
// The node5 driver: rocketmq-client-nodejs (the official 5.x gRPC SDK) as a producer, and with ops
// "consume" (SimpleConsumers), "crowd" (producers and SimpleConsumers at once) and "push" (a PushConsumer) as a consumer. Reads the same JSON params as
// interop/py5/driver.py on stdin and prints the same events, one JSON object a line. The SDK counts
// durations in milliseconds where the params give seconds. Every op takes "acl" ({access_key, secret_key}:
// the SDK signs its calls; none: no credentials) and "tls" (sslEnabled: grpc-js checks the certificate
// against its default roots, so the driver points GRPC_DEFAULT_SSL_ROOTS_FILE_PATH at "tls_ca", or at the
// certificate the endpoint shows, before it loads the SDK).
const fs = require('fs');
const os = require('os');
const path = require('path');
const tls = require('tls');
let sdk, TransactionResolution, FilterType; // loaded by main() once the roots are set

function loadSdk() {
  sdk = require('rocketmq-client-nodejs');
  ({ TransactionResolution, FilterType } = require(path.join(path.dirname(require.resolve('rocketmq-client-nodejs')),
    '..', 'proto', 'apache', 'rocketmq', 'v2', 'definition_pb')));
}

// With "tls": grpc-js's default roots become "tls_ca", or the endpoint's own certificate (test use).
async function trust(params) {
  if (!params.tls) return;
  let ca = params.tls_ca;
  if (!ca) {
    const at = params.endpoint.lastIndexOf(':');
    const host = params.endpoint.slice(0, at);
    const port = Number(params.endpoint.slice(at + 1));
    const der = await new Promise((resolve, reject) => {
      const socket = tls.connect({ host, port, rejectUnauthorized: false, ALPNProtocols: ['h2'] }, () => {
        const cert = socket.getPeerCertificate();
        socket.destroy();
        resolve(cert.raw);
      });
      socket.setTimeout(5000, () => socket.destroy(new Error(`no TLS answer from ${params.endpoint} within 5 s`)));
      socket.on('error', reject);
    });
    const pem = `-----BEGIN CERTIFICATE-----\n${der.toString('base64').match(/.{1,64}/g).join('\n')}\n-----END CERTIFICATE-----\n`;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rmqtx-node5-ca-'));
    ca = path.join(dir, 'ca.pem');
    fs.writeFileSync(ca, pem);
    process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  }
  process.env.GRPC_DEFAULT_SSL_ROOTS_FILE_PATH = ca;
}

function emit(event, fields) {
  process.stdout.write(JSON.stringify({ event, at: Date.now() / 1000, ...fields }) + '\n');
}

// The SDK logs through egg-logger to ~/logs by default; keep its chatter on stderr only (info and debug
// lines only with RMQTX_NODE5_DEBUG set).
const logger = {
  info: (...a) => process.env.RMQTX_NODE5_DEBUG && process.stderr.write(a.map(String).join(' ') + '\n'),
  debug: (...a) => process.env.RMQTX_NODE5_DEBUG && process.stderr.write(a.map(String).join(' ') + '\n'),
  warn: (...a) => process.stderr.write(a.map(String).join(' ') + '\n'),
  error: (...a) => process.stderr.write(a.map(String).join(' ') + '\n'),
};

function build(spec, topic) {
  const msg = {
    topic,
    body: spec.body_b64 !== undefined ? Buffer.from(spec.body_b64, 'base64') : Buffer.from(spec.body, 'utf8'),
  };
  if (spec.tag) msg.tag = spec.tag;
  if (spec.keys && spec.keys.length) msg.keys = spec.keys;
  const props = Object.entries(spec.props || {});
  if (props.length) msg.properties = new Map(props);
  if (spec.group) msg.messageGroup = spec.group;
  if (spec.delay_s) msg.deliveryTimestamp = new Date(Date.now() + spec.delay_s * 1000);
  return msg;
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

function label(view) {
  return view.body.toString('utf8').split('#', 1)[0];
}

function clientOptions(params) {
  const keys = params.acl;
  return {
    endpoints: params.endpoint, namespace: '', sslEnabled: Boolean(params.tls), requestTimeout: (params.timeout || 5) * 1000, logger,
    ...(keys ? { sessionCredentials: { accessKey: keys.access_key, accessSecret: keys.secret_key } } : {}),
  };
}

// Op "refused_send": one send per spec, each answered by a "sent" or a "refused" event (error: the SDK's
// error text, with the endpoint's status). The producer names no topics up front, so that its start does
// not stop at a refused route; a producer that cannot start refuses every spec.
async function refusedSend(params) {
  const producer = new sdk.Producer({ ...clientOptions(params) });
  try {
    await producer.startup();
  } catch (err) {
    for (const spec of params.messages) emit('refused', { body: spec.body, error: describe(err) });
    await producer.shutdown().catch(() => {});
    return 0;
  }
  try {
    for (const spec of params.messages) {
      try {
        const receipt = await producer.send(build(spec, params.topic));
        emit('sent', { body: spec.body, msg_id: receipt.messageId, offset: receipt.offset ?? null });
      } catch (err) {
        emit('refused', { body: spec.body, error: describe(err) });
      }
    }
  } finally {
    await producer.shutdown().catch(() => {});
  }
  return 0;
}

// An error and its causes' messages (the SDK wraps the endpoint's status in them).
function describe(err) {
  const parts = [];
  for (let e = err; e && parts.length < 5; e = e.cause) parts.push(`${e.name}: ${e.message}`);
  return parts.join(' <- ');
}

// Op "consume": `members` SimpleConsumers receive until `expect` bodies are acked, then linger; `actions`
// leaves a body un-acked (skip_once) or changes its invisible duration (change_once, change_ack) on its
// first delivery. `fifo`: as an orderly consumer, a message group with an un-acked message in a batch has
// its later messages in that batch left alone too ("held" events). Op "crowd": the same, with `producers`
// producers sending at once while the consumers receive (sendTogether).
async function consume(params) {
  const { topic } = params;
  const actions = params.actions || {};
  const sql = params.expression_type === 'SQL92';
  const filter = new sdk.FilterExpression(params.tag || '*', sql ? FilterType.SQL : FilterType.TAG);
  const invisibleMs = (params.invisible ?? 10) * 1000;
  const deadline = Date.now() + (params.wait ?? 30) * 1000;
  const lingerMs = (params.linger ?? 0) * 1000;
  const members = [];
  for (let i = 0; i < (params.members ?? 1); i++) {
    members.push(new sdk.SimpleConsumer({
      ...clientOptions(params), consumerGroup: params.group, subscriptions: new Map([[ topic, filter ]]),
      awaitDuration: (params.await ?? 2) * 1000,
    }));
  }
  const fifo = Boolean(params.fifo);
  const failures = [];
  const seen = new Map();
  const acked = new Set();
  let doneAt = params.expect === 0 ? Date.now() : null;
  try {
    await Promise.all(members.map(c => c.startup()));
    emit('started', {});

    async function handle(member, consumer, view) {
      const body = label(view);
      const count = (seen.get(body) || 0) + 1;
      seen.set(body, count);
      const handle = view.receiptHandle;
      emit('recv', {
        member, body, msg_id: view.messageId, attempt: view.deliveryAttempt, handle, tag: view.tag || null,
        keys: [...view.keys].sort(), topic: view.topic, props: Object.fromEntries(view.properties), size: view.body.length,
        message_group: view.messageGroup ?? null,
      });
      const action = actions[body] || 'ack';
      if ((count === 1 && action === 'skip_once') || action === 'skip_always') return false;
      if (count === 1 && (action === 'change_once' || action === 'change_ack')) {
        await consumer.changeInvisibleDuration(view, (params.change_s ?? 2) * 1000);
        emit('changed', { member, body, msg_id: view.messageId, handle });
        if (action === 'change_once') return false;
      }
      await consumer.ack(view);
      acked.add(body);
      if (acked.size >= params.expect && doneAt === null) doneAt = Date.now();
      emit('acked', { member, body, msg_id: view.messageId, handle: view.receiptHandle });
      return true;
    }

    async function run(member, consumer) {
      try {
        while (Date.now() < deadline) {
          if (doneAt !== null && Date.now() >= doneAt + lingerMs) return;
          const views = await consumer.receive(params.batch ?? 16, invisibleMs);
          const held = new Set(); // fifo: message groups with an un-acked message in this batch
          for (const view of views) {
            if (fifo && held.has(view.messageGroup)) {
              emit('held', { member, body: label(view), attempt: view.deliveryAttempt, message_group: view.messageGroup });
              continue;
            }
            if (!(await handle(member, consumer, view)) && fifo && view.messageGroup) held.add(view.messageGroup);
          }
        }
      } catch (err) {
        failures.push(`member ${member}: ${err && err.name}: ${err && err.message}`);
      }
    }

    const sending = params.producers ? sendTogether(params).then(failed => failures.push(...failed)) : null;
    await Promise.all([...members.map((consumer, i) => run(i, consumer)), sending]);
  } finally {
    await Promise.all(members.map(c => c.shutdown().catch(() => {})));
  }
  for (const failure of failures) emit('error', { error: failure });
  return failures.length ? 1 : 0;
}

// Op "crowd"'s producers: `producers` Producer instances, started together, each sending its own specs
// (`producer`: its index) in order, all at once; "sent" events carry `producer`. Resolves to the failures.
async function sendTogether(params) {
  const failures = [];
  const producers = [];
  for (let i = 0; i < params.producers; i++) producers.push(new sdk.Producer({ ...clientOptions(params), topics: [params.topic] }));
  try {
    const started = await Promise.allSettled(producers.map(p => p.startup()));
    started.forEach((r, i) => r.status === 'rejected' && failures.push(`producer ${i}: start: ${describe(r.reason)}`));
    if (failures.length) return failures;
    await Promise.all(producers.map(async (producer, index) => {
      try {
        for (const spec of params.messages.filter(s => s.producer === index)) {
          const at = Date.now() / 1000;
          const receipt = await producer.send(build(spec, params.topic));
          emit('sent', { producer: index, body: spec.body, at, msg_id: receipt.messageId, offset: receipt.offset ?? null });
        }
      } catch (err) {
        failures.push(`producer ${index}: ${describe(err)}`);
      }
    }));
  } finally {
    await Promise.all(producers.map(p => p.shutdown().catch(() => {})));
  }
  return failures;
}

// Op "push": a PushConsumer failing the first delivery of each `fail_once` body and every delivery of each
// `fail_always` body (done with one after `attempts` deliveries), until `expect` bodies are done.
async function push(params) {
  const failOnce = new Set(params.fail_once || []);
  const failAlways = new Set(params.fail_always || []);
  const attempts = params.attempts ?? 0;
  const seen = new Map();
  const consumed = new Set();
  let allDone;
  const done = new Promise(resolve => { allDone = resolve; });
  if (params.expect === 0) allDone();
  const listener = {
    async consume(view) {
      const body = label(view);
      const count = (seen.get(body) || 0) + 1;
      seen.set(body, count);
      emit('recv', {
        body, msg_id: view.messageId, attempt: view.deliveryAttempt, topic: view.topic, tag: view.tag || null,
        keys: [...view.keys].sort(),
      });
      const fail = failAlways.has(body) || (failOnce.has(body) && count === 1);
      if (!fail || (failAlways.has(body) && count >= attempts)) {
        consumed.add(body);
        if (consumed.size >= params.expect) allDone();
      }
      return fail ? sdk.ConsumeResult.FAILURE : sdk.ConsumeResult.SUCCESS;
    },
  };
  const consumer = new sdk.PushConsumer({
    ...clientOptions(params), consumerGroup: params.group,
    subscriptions: new Map([[ params.topic, new sdk.FilterExpression('*') ]]), messageListener: listener,
  });
  let status = 0;
  try {
    await consumer.startup();
    emit('started', {});
    const wait = (params.wait ?? 30) * 1000;
    const timedOut = await Promise.race([ done.then(() => false), sleep(wait).then(() => true) ]);
    if (timedOut) {
      emit('error', { error: `consumed ${[...consumed].sort()} of ${params.expect}` });
      status = 1;
    }
    await sleep((params.linger ?? 0.5) * 1000); // the SDK acks (or forwards to the DLQ) after the listener returns
  } finally {
    await consumer.shutdown().catch(() => {});
  }
  return status;
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const params = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  await trust(params);
  loadSdk();
  const { topic, op } = params;
  if (op === 'refused_send') return refusedSend(params);
  if (op === 'consume' || op === 'crowd') return consume(params);
  if (op === 'push') return push(params);
  const checkStates = new Map(params.messages.map(s => [s.body, s.check_state || 'COMMIT']));
  const expected = new Set(params.messages.filter(s => s.action === 'check').map(s => s.body));
  const checked = new Set();
  let allChecked;
  const done = new Promise(resolve => { allChecked = resolve; });
  if (expected.size === 0) allChecked();

  const checker = {
    async check(view) {
      const label = view.body.toString('utf8').split('#', 1)[0];
      const state = checkStates.get(label) || 'COMMIT';
      emit('checked', { body: label, msg_id: view.messageId, state });
      if (expected.has(label)) {
        checked.add(label);
        if ([...expected].every(b => checked.has(b))) allChecked();
      }
      return state === 'COMMIT' ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
    },
  };
  const producer = new sdk.Producer({ ...clientOptions(params), topics: [topic], ...(op === 'tx' ? { checker } : {}) });
  // the SDK ends a checked transaction after the checker's answer: count the ends, so that the
  // producer is not shut down before the last one went out
  let ends = 0;
  const endTransaction = producer.endTransaction.bind(producer);
  producer.endTransaction = async (...args) => {
    try { return await endTransaction(...args); } finally { ends += 1; }
  };
  let decided = 0;
  await producer.startup();
  let status = 0;
  try {
    if (op === 'send' && params.async) {
      // the SDK's sends are promises: start them all, report each as it completes
      await Promise.all(params.messages.map(spec => {
        const at = Date.now() / 1000; // a delivery timestamp counts from here
        return producer.send(build(spec, topic)).then(receipt => emit('sent', { body: spec.body, at, msg_id: receipt.messageId, offset: receipt.offset ?? null }));
      }));
    } else {
      for (const spec of params.messages) {
        const at = Date.now() / 1000; // a delivery timestamp counts from here
        if (op === 'tx') {
          const tx = producer.beginTransaction();
          const receipt = await producer.send(build(spec, topic), tx);
          emit('sent', { body: spec.body, at, msg_id: receipt.messageId, offset: null, transaction_id: receipt.transactionId });
          if (spec.action === 'commit' || spec.action === 'rollback') {
            decided += 1;
            emit('ended', { body: spec.body, action: spec.action });
            await (spec.action === 'commit' ? tx.commit() : tx.rollback());
          }
        } else {
          const receipt = await producer.send(build(spec, topic));
          emit('sent', { body: spec.body, at, msg_id: receipt.messageId, offset: receipt.offset ?? null });
        }
      }
    }
    const wait = (params.wait || 30) * 1000;
    const timedOut = await Promise.race([done.then(() => false), new Promise(r => setTimeout(() => r(true), wait).unref())]);
    if (timedOut) {
      emit('error', { error: `not every open transaction was checked: ${[...expected].filter(b => !checked.has(b)).sort()}` });
    } else {
      const until = Date.now() + 10000;
      while (ends < decided + checked.size && Date.now() < until) await new Promise(r => setTimeout(r, 10));
      if (ends < decided + checked.size) emit('error', { error: 'the checked transactions were not ended within 10 s' });
    }
  } catch (err) {
    emit('error', { error: `${err && err.name}: ${err && err.message}` });
    status = 1;
  } finally {
    await producer.shutdown().catch(() => {});
  }
  return status;
}

main().then(code => process.exit(code), err => {
  emit('error', { error: `${err && err.name}: ${err && err.message}` });
  process.exit(1);
});
