'use strict';
// The node5 driver: rocketmq-client-nodejs (the official 5.x gRPC SDK) as a producer. Reads the same
// JSON params as interop/py5/driver.py on stdin and prints the same events, one JSON object a line.
const path = require('path');
const sdk = require('rocketmq-client-nodejs');
const { TransactionResolution } = require(path.join(path.dirname(require.resolve('rocketmq-client-nodejs')),
  '..', 'proto', 'apache', 'rocketmq', 'v2', 'definition_pb'));

function emit(event, fields) {
  process.stdout.write(JSON.stringify({ event, at: Date.now() / 1000, ...fields }) + '\n');
}

// The SDK logs through egg-logger to ~/logs by default; keep its chatter on stderr only.
const logger = {
  info: () => {}, debug: () => {},
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

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const params = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const { topic, op } = params;
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
  const producer = new sdk.Producer({
    endpoints: params.endpoint, namespace: '', sslEnabled: false, requestTimeout: (params.timeout || 5) * 1000,
    topics: [topic], logger, ...(op === 'tx' ? { checker } : {}),
  });
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
