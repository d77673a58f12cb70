// Scenarios through the Node client ali-ons; prints one JSON line per event.
// Usage: node node_client.js produce|consume NAMESRV TOPIC GROUP [ARGS...]
'use strict';
const path = require('path');
const { Producer, Consumer, Message } = require(path.join(__dirname, '..', '..', 'interop', 'node', 'node_modules', 'ali-ons'));

const emit = (event) => console.log(JSON.stringify(event));
const quietLogger = { info() {}, warn() {}, debug() {}, error(e) { console.error(String(e)); } };

async function produce(nameSrv, topic, group, count) {
  const producer = new Producer({ nameSrv, producerGroup: group, httpclient: {}, logger: quietLogger });
  await producer.ready();
  const tags = ['TagA', 'TagB', 'TagC'];
  for (let i = 0; i < Number(count); i++) {
    const msg = new Message(topic, tags[i % 3], Buffer.from(`node-${i}`));
    msg.keys = [`node-key-${i}`];
    const result = await producer.send(msg);
    emit({ kind: 'sync', i, status: result.sendStatus, msg_id: result.msgId, queue_id: result.messageQueue.queueId, offset: result.queueOffset });
  }
  await producer.close();
}

async function consume(nameSrv, topic, group, expression, expect, seconds) {
  const consumer = new Consumer({ nameSrv, consumerGroup: group, httpclient: {}, logger: quietLogger, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET' });
  let seen = 0;
  let finish;
  const done = new Promise((resolve) => { finish = resolve; setTimeout(resolve, Number(seconds) * 1000); });
  consumer.subscribe(topic, expression, async (msg) => {
    seen++;
    emit({ kind: 'recv', body: msg.body.toString(), tags: msg.tags, keys: msg.keys, queue_id: msg.queueId, queue_offset: msg.queueOffset });
    if (seen >= Number(expect)) finish();
  });
  await consumer.ready();
  await done;
  await new Promise((r) => setTimeout(r, 500));
  await consumer.close();
  emit({ kind: 'done', count: seen });
}

// Consume with a handler that fails as told: 'first' fails deliveries with reconsumeTimes 0, 'always' every one.
async function failing(nameSrv, topic, group, mode, maxReconsumeTimes, expect, seconds) {
  const consumer = new Consumer({ nameSrv, consumerGroup: group, httpclient: {}, logger: quietLogger,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET', maxReconsumeTimes: Number(maxReconsumeTimes) });
  let settled = 0;
  let finish;
  const done = new Promise((resolve) => { finish = resolve; setTimeout(resolve, Number(seconds) * 1000); });
  consumer.subscribe(topic, '*', async (msg) => {
    emit({ kind: 'recv', body: msg.body.toString(), reconsume: msg.reconsumeTimes, topic: msg.topic, at: Date.now() / 1000 });
    if (mode === 'always' || msg.reconsumeTimes === 0) throw new Error('fail on purpose');
    if (++settled >= Number(expect)) finish();
  });
  await consumer.ready();
  await done;
  await consumer.close();
}

// Send delayed messages to a running consumer; report send and arrival times.
async function delayed(nameSrv, topic, group) {
  const producer = new Producer({ nameSrv, producerGroup: 'P_' + group, httpclient: {}, logger: quietLogger });
  await producer.ready();
  const consumer = new Consumer({ nameSrv, consumerGroup: group, httpclient: {}, logger: quietLogger, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET' });
  let finish;
  let warmedUp;
  let seen = 0;
  const done = new Promise((resolve) => { finish = resolve; setTimeout(resolve, 30000); });
  const ready = new Promise((resolve) => { warmedUp = resolve; setTimeout(resolve, 30000); });
  consumer.subscribe(topic, '*', async (msg) => {
    const body = msg.body.toString();
    if (body === 'warm-up') { warmedUp(); return; }
    emit({ kind: 'recv', body, at: Date.now() / 1000 });
    if (++seen >= 2) finish();
  });
  await consumer.ready();
  // the consumer got a message sent after it started: it is subscribed and pulling
  await producer.send(new Message(topic, 'TagD', Buffer.from('warm-up')));
  await ready;
  for (const level of [1, 2]) {
    const msg = new Message(topic, 'TagD', Buffer.from(`level-${level}`));
    msg.delayTimeLevel = level;
    emit({ kind: 'sent', body: `level-${level}`, at: Date.now() / 1000, status: (await producer.send(msg)).sendStatus });
  }
  await done;
  await consumer.close();
  await producer.close();
}

const [scenario, ...args] = process.argv.slice(2);
const run = { produce, consume, failing, delayed }[scenario];
run(...args).then(() => process.exit(0), (err) => { console.error(err && err.stack || String(err)); process.exit(1); });
