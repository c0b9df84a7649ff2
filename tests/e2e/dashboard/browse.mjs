// The dashboard in a real headless Chromium, as an operator uses it: sign in with the admin token, filter the
// traces by user, open a trace (waterfall, attributes, the request), read the latency percentiles, sign out.
// Usage: node browse.mjs <gateway URL> <admin token> <user to filter by> <screenshot folder>
// Prints one JSON object of what the page showed; exits non-zero with the error when a step fails.
import chromium from "@sparticuz/chromium";
import { chromium as playwright } from "playwright-core";

const [base, token, user, shots] = process.argv.slice(2);
const TIMEOUT = Number(process.env.DASHBOARD_STEP_TIMEOUT_MS || 60000);
const browser = await playwright.launch({ executablePath: await chromium.executablePath(), args: chromium.args, headless: true });
const seen = { requests: [] };
try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on("request", (r) => seen.requests.push(r.url()));
  await page.goto(base + "/admin");
  await page.waitForSelector("#signin-form", { state: "visible" });
  await page.fill("#credential", token);
  await page.click("#signin-button");
  await page.waitForSelector("#tabs", { state: "visible" });
  await page.waitForSelector("#traces tr");
  seen.who = await page.textContent("#who");
  seen.cookieVisibleToScript = await page.evaluate(() => document.cookie);
  const cookies = await context.cookies();
  seen.sessionCookie = cookies.filter((c) => c.name === "ragmesh_admin_session").map((c) => ({ httpOnly: c.httpOnly, sameSite: c.sameSite }));

  // filter: the one user's traces
  await page.fill("#filters input[name=user]", user);
  await page.click("#filters button[type=submit]");
  await page.waitForFunction((u) => {
    const rows = [...document.querySelectorAll("#traces tr.row")];
    return rows.length > 0 && rows.every((r) => r.children[2].textContent === u);
  }, user);
  seen.filteredUsers = await page.$$eval("#traces tr.row", (rows) => rows.map((r) => r.children[2].textContent));
  await page.screenshot({ path: `${shots}/dashboard-traces.png` });

  // errors only: none of this user's traces failed
  await page.check("#filters input[name=errors]");
  await page.click("#filters button[type=submit]");
  await page.waitForFunction(() => document.querySelector("#traces td.muted")?.textContent === "No trace matches.");
  await page.uncheck("#filters input[name=errors]");
  await page.click("#filters button[type=submit]");
  await page.waitForSelector("#traces tr.row");

  // open a trace: the waterfall, a span's attributes in the page, the request's facts
  await page.click("#traces tr.row >> nth=0");
  await page.waitForSelector("#waterfall tr.span");
  seen.spans = await page.$$eval("#waterfall tr.span", (rows) => rows.map((r) => r.children[0].textContent.trim()));
  // the pipeline's own span (it carries the rag.* attributes), else the root
  const names = seen.spans;
  const chosen = Math.max(0, names.indexOf("chat"));
  await page.click(`#waterfall tr.span >> nth=${chosen}`);
  seen.openedSpan = names[chosen];
  seen.attributes = await page.$$eval("#span-attributes dt", (dts) => dts.map((d) => d.textContent));
  seen.request = await page.$$eval("#request dt", (dts) => dts.map((d) => d.textContent));
  seen.requestUser = await page.evaluate(() => {
    const dt = [...document.querySelectorAll("#request dt")].find((d) => d.textContent === "user");
    return dt ? dt.nextElementSibling.textContent : null;
  });
  seen.url = page.url();
  await page.screenshot({ path: `${shots}/dashboard-trace.png`, fullPage: true });

  // latency: per-step percentiles as a chart and a table
  await page.click("#tabs button[data-tab=latency]");
  await page.waitForSelector("#latency-chart svg rect");
  seen.percentileRows = await page.$$eval("#stats tr", (rows) => rows.map((r) => [...r.children].map((c) => c.textContent)));
  seen.chartBars = await page.$$eval("#latency-chart svg rect", (rects) => rects.length);
  await page.screenshot({ path: `${shots}/dashboard-latency.png`, fullPage: true });

  // feedback and document problems: their own tabs, loaded through the session (an error shows as a red row)
  await page.click("#tabs button[data-tab=feedback]");
  await page.waitForSelector("#feedback tr");
  seen.feedback = await page.$$eval("#feedback tr", (rows) => rows.map((r) => ({ text: r.textContent.trim(), error: !!r.querySelector("td.err[colspan]") })));
  await page.click("#tabs button[data-tab=documents]");
  await page.waitForSelector("#problems tr");
  seen.problems = await page.$$eval("#problems tr", (rows) => rows.map((r) => ({ text: r.textContent.trim(), error: !!r.querySelector("td.err[colspan]") })));
  await page.waitForFunction(() => !document.querySelector("#backlog").textContent.includes("…"));
  seen.backlog = await page.$eval("#backlog", (p) => p.textContent.trim());

  seen.localStorage = await page.evaluate(() => ({ local: localStorage.length, session: sessionStorage.length }));

  // sign out: back to the sign-in, and a reload stays signed out
  await page.click("#tabs button[data-tab=traces]");
  await page.click("#signout");
  await page.waitForSelector("#signin-form", { state: "visible" });
  await page.reload();
  await page.waitForSelector("#signin-form", { state: "visible" });
  seen.signedOut = true;
} catch (error) {
  console.log(JSON.stringify({ ...seen, error: String(error && error.stack || error) }));
  await browser.close();
  process.exit(1);
}
await browser.close();
console.log(JSON.stringify(seen));
