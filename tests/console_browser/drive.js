// Drives a headless chromium through every page of the rmqtx console with playwright-core.
// argv: a JSON object {base, out, chromium, topic, group, key, newTopic}; prints one JSON line per page
// ({page, text, screenshot}) and {done: true}; page errors are reported as {pageError}.
"use strict";

const path = require("path");
const { chromium } = require("playwright-core");

async function main() {
  const cfg = JSON.parse(process.argv[2]);
  const report = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
  const browser = await chromium.launch({ executablePath: cfg.chromium, headless: true, args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    page.setDefaultTimeout(15000);
    page.on("pageerror", (err) => report({ pageError: String(err) }));
    page.on("dialog", (dialog) => dialog.accept());

    const visit = async (hash, name) => {
      await page.goto(`${cfg.base}/${hash}`);
      await page.waitForSelector(`main[data-page="${name}"]`);
    };
    const shot = async (name) => {
      const file = path.join(cfg.out, `${name}.png`);
      await page.screenshot({ path: file, fullPage: true });
      report({ page: name, text: await page.innerText("main"), notice: await page.innerText("#notice"), screenshot: file });
    };
    const noticeContains = (text) => page.waitForFunction(
      (t) => !document.querySelector("#notice").hidden && document.querySelector("#notice").textContent.includes(t), text);

    await visit("#cluster", "cluster");
    await page.waitForSelector(".card");
    await shot("cluster");

    await visit("#topics", "topics");
    await page.waitForSelector(`tr[data-topic="${cfg.topic}"]`);
    await page.fill("#topic-form input[name=topic]", cfg.newTopic);
    await page.fill("#topic-form input[name=readQueueNums]", "2");
    await page.fill("#topic-form input[name=writeQueueNums]", "2");
    await page.click("#topic-form button");
    await noticeContains(`topic ${cfg.newTopic} created`);
    await page.waitForSelector(`tr[data-topic="${cfg.newTopic}"]`);
    await page.goto(`${cfg.base}/#topics?topic=${encodeURIComponent(cfg.topic)}`);
    await page.waitForSelector("#topic-detail table");
    await shot("topics");

    await visit(`#groups?group=${encodeURIComponent(cfg.group)}`, "groups");
    await page.waitForSelector("#group-detail tr[data-queue]");
    await shot("groups");

    await visit("#messages", "messages");
    await page.fill("#by-key input[name=topic]", cfg.topic);
    await page.fill("#by-key input[name=key]", cfg.key);
    await page.click("#by-key button");
    await page.waitForSelector("#results .msg");
    await shot("messages");

    await visit(`#dlq?group=${encodeURIComponent(cfg.group)}`, "dlq");
    await page.waitForSelector("button.resend");
    await page.click("button.resend");
    await noticeContains(`resent to %RETRY%${cfg.group}`);
    await shot("dlq");

    await visit("#send", "send");
    await page.fill("#send-form input[name=topic]", cfg.topic);
    await page.fill("#send-form input[name=tags]", "FromBrowser");
    await page.fill("#send-form textarea[name=body]", "sent from chromium");
    await page.click("#send-form button");
    await noticeContains("sent: msgId");
    await shot("send");
    report({ done: true });
  } finally {
    await browser.close();
  }
}

main().catch((err) => { process.stderr.write(String(err && err.stack || err) + "\n"); process.exit(1); });
