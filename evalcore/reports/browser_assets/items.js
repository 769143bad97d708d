/* evalcore's item browser: the script of items.html (evalcore/reports/browser.py writes the page and its data).
 *
 * Plain JavaScript, no library, nothing loaded from outside the run's folder. The data come as small script files
 * that call back into window.EVB (browser/meta.js, browser/index/NNNNN.js, browser/data/NNNNN.js, browser/sel-*.js),
 * because a page opened from file:// may not fetch() local files in Chromium, but may load local scripts. meta.js
 * names the facets and how many shards there are; a page of items loads only the data shards holding it; a filter or
 * a sort loads the index shards (a few integer codes per item) once; a clip is fetched only when it is played
 * (preload="none"). Numbers arrive formatted as the report formats them (evalcore/reports/tables_html.py).
 *
 * State lives in the URL's hash (#p=mcq&m=listener&ev=1&page=2), so the report and the nightly dashboard link to a
 * filtered view and the browser's back button works.
 */
(function () {
  "use strict";
  const PAGE = 25;
  const OUT_MARK = { right: "✓", wrong: "✗", partial: "◐", unparsed: "?", error: "⚠", scored: "•" };
  const KEYS = ["p", "d", "t", "m", "c", "o", "v", "ev", "pair", "sel", "sort", "page"];
  let META = null;
  const INDEX = [];
  const DATA = [];
  const SELECTIONS = {};
  const scripts = {};
  let token = 0;

  window.EVB = {
    meta(m) { META = m; start(); },
    index(k, x) { INDEX[k] = x; },
    data(k, rows) { DATA[k] = rows; },
    selection(name, s) { SELECTIONS[name] = s; },
  };

  // ------------------------------------------------------------------ loading shards

  function load(src) {
    if (!scripts[src]) {
      scripts[src] = new Promise((resolve, reject) => {
        const s = document.createElement("script");
        s.src = src;
        s.onload = () => resolve();
        s.onerror = () => reject(new Error("cannot load " + src));
        document.head.appendChild(s);
      });
    }
    return scripts[src];
  }
  const pad = (k) => String(k).padStart(5, "0");
  const dataShard = (k) => load(`browser/data/${pad(k)}.js`);
  const indexShard = (k) => load(`browser/index/${pad(k)}.js`);

  async function allIndex() {
    const n = META.index_shards;
    let done = 0;
    await Promise.all(Array.from({ length: n }, (_, k) => indexShard(k).then(() => {
      done += 1;
      if (done < n) say(`Filtering… ${done} of ${n} index shards read`);
    })));
  }

  // ------------------------------------------------------------------ state in the hash

  function readState() {
    const q = new URLSearchParams(location.hash.slice(1));
    const s = {};
    for (const k of KEYS) if (q.get(k)) s[k] = q.get(k);
    s.page = Math.max(1, parseInt(s.page || "1", 10) || 1);
    return s;
  }

  function writeState(s) {
    const q = new URLSearchParams();
    for (const k of KEYS) if (s[k] && !(k === "page" && s[k] === 1)) q.set(k, s[k]);
    const h = q.toString();
    if (("#" + h) !== location.hash && !(h === "" && location.hash === "")) location.hash = h;
    else render();
  }

  function code(list, name) {
    if (name === undefined) return null;
    const i = list.indexOf(name);
    return i < 0 ? -2 : i; // -2: a name this run does not have (matches nothing)
  }

  // ------------------------------------------------------------------ filtering over the index

  function needsIndex(s) {
    return ["p", "d", "t", "m", "c", "o", "v", "ev", "pair", "sel"].some((k) => s[k]) || s.sort === "evidence";
  }

  function matcher(s) {
    const NV = META.variants.length, NC = META.conditions.length, NO = META.outcomes.length;
    const P = code(META.protocols, s.p), D = code(META.datasets, s.d), T = code(META.tasks, s.t);
    const M = code(META.models, s.m), C = code(META.conditions, s.c), O = code(META.outcomes, s.o);
    const V = code(META.variants, s.v);
    const correct = META.conditions.indexOf("correct");
    const ERR = META.outcomes.indexOf("error");
    const pairC = s.pair ? code(META.conditions, s.pair) : null;
    const requestLevel = M !== null || C !== null || O !== null || V !== null;
    const mv = (m, v) => (M === null || m === M) && (V === null || v === V);
    return function (x, j) {
      if (P !== null && x.p[j] !== P) return -1;
      if (D !== null && x.d[j] !== D) return -1;
      if (T !== null && x.t[j] !== T) return -1;
      const reqs = x.r[j];
      if (requestLevel) {
        let hit = M === null && C === null && V === null && O === ERR && x.f[j] === 1;
        for (let i = 0; i < reqs.length && !hit; i++) {
          const r = reqs[i], o = r % NO, c = Math.floor(r / NO) % NC;
          const v = Math.floor(r / (NO * NC)) % NV, m = Math.floor(r / (NO * NC * NV));
          hit = mv(m, v) && (C === null || c === C) && (O === null || o === O);
        }
        if (!hit) return -1;
      }
      if (pairC !== null) { // the items behind a paired difference: scored under both conditions
        const got = new Set();
        for (const r of reqs) {
          const o = r % NO, c = Math.floor(r / NO) % NC;
          const v = Math.floor(r / (NO * NC)) % NV, m = Math.floor(r / (NO * NC * NV));
          if (o !== ERR && mv(m, v) && (c === correct || c === pairC)) got.add(c);
        }
        if (got.size < 2) return -1;
      }
      let evidence = 0;
      for (const e of x.e[j]) {
        const c = e % NC, v = Math.floor(e / NC) % NV, m = Math.floor(e / (NC * NV));
        if (mv(m, v) && (C === null || C === correct || c === C) && (pairC === null || c === pairC)) evidence++;
      }
      if (s.ev && evidence === 0) return -1;
      return evidence;
    };
  }

  // a selection's entry: "<name>:<k>" (its k-th entry) or "<name>:<key>" (the entry with that key, e.g. a cell
  // "protocol|dataset|model|variant|condition" of browser/sel-verdicts.js)
  function selParts(sel) {
    const i = sel.indexOf(":");
    return i < 0 ? [sel, "0"] : [sel.slice(0, i), sel.slice(i + 1)];
  }
  function entryOf(sel) {
    const [name, entry] = selParts(sel);
    const s = SELECTIONS[name];
    if (!s) return null;
    if (/^[0-9]+$/.test(entry || "0")) return s.entries[parseInt(entry || "0", 10)] || null;
    return s.entries.find((e) => e.key === entry) || null;
  }

  async function matches(s) {
    await allIndex();
    let only = null;
    if (s.sel) {
      const [name] = selParts(s.sel);
      if (!/^[A-Za-z0-9_.-]+$/.test(name)) throw new Error("bad selection name");
      await load(`browser/sel-${name}.js`);
      const e = entryOf(s.sel);
      only = new Set(e ? e.items : []);
    }
    const test = matcher(s);
    const hits = [];
    INDEX.forEach((x, k) => {
      for (let j = 0; j < x.p.length; j++) {
        const ord = k * META.per_index + j;
        if (only && !only.has(ord)) continue;
        const ev = test(x, j);
        if (ev >= 0) hits.push([ord, ev]);
      }
    });
    if (s.sort === "evidence") hits.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
    return hits.map((h) => h[0]);
  }

  // ------------------------------------------------------------------ drawing

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
    }
    for (const c of kids.flat()) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function say(text) { document.getElementById("status").textContent = text; }

  function cell(item, c, cond, s, group) {
    if (!c) return el("td", { class: "none" }, "—");
    const out = META.outcomes[c.u];
    const head = el("div", { class: `out out-${out}` }, `${OUT_MARK[out] || ""} ${out}`);
    const td = el("td", { class: [c.ev ? "ev" : "", s.c === cond || s.pair === cond ? "hit" : ""].join(" ").trim(),
                          "data-outcome": out, "data-condition": cond, "data-request": c.r }, head);
    if (c.ev) td.append(el("div", { class: "evnote" }, "⚑ " + c.ev));
    if (c.a) td.append(el("div", { class: "answer" }, c.a));
    if (c.vd) td.append(el("div", { class: "vdnote", title: "the published rule and evalcore's strict reading differ" },
                           "⚖ " + c.vd));
    if (c.x && c.x !== c.a) td.append(el("div", { class: "txt", title: "the model's whole answer" }, c.x));
    if (c.s && c.s.length) td.append(el("div", { class: "scores" }, c.s.map(([k, v]) => `${k} ${v}`).join(" · ")));
    if (c.e) td.append(el("div", { class: "err" }, `${c.e[0]} · ${c.e[1]}: ${c.e[2]}`));
    if (c.au) { // a button until played: the page holds no media element, and no clip is fetched, before a click
      td.append(el("button", { type: "button", class: "play", "data-clip": c.au, "data-seconds": c.sec || null,
                               "aria-label": `play the ${cond} clip as ${META.models[group[0]]} heard it` },
                   `▶ ${c.sec ? (+c.sec).toFixed(1) + " s" : "play"}`));
    }
    if (c.an) td.append(el("div", { class: "anote" }, c.an));
    return td;
  }

  function truth(item) {
    const box = el("div", { class: "truth" });
    if (item.o && item.o.length) {
      box.append(el("ol", { class: "opts", type: "A" },
        item.o.map((o, i) => el("li", { class: i === item.ok ? "right" : "" }, o + (i === item.ok ? "  ✓" : "")))));
    }
    if (item.l && item.l.length) box.append(el("p", {}, el("b", {}, "labels: "), item.l.join(", ")));
    if (item.ref) box.append(el("p", { class: "ref" }, el("b", {}, "reference: "), item.ref));
    if (item.pp && item.pp.length) {  // the paraphrase conditions' wording of the question and its options
      box.append(el("details", { class: "paras" }, el("summary", {}, `${item.pp.length} paraphrase${item.pp.length === 1 ? "" : "s"}`),
        ...item.pp.map((p) => el("div", { class: "para" }, el("p", {}, el("b", {}, p[0] + ": "), p[1]),
          p[2].length ? el("ol", { class: "opts", type: "A" }, p[2].map((o) => el("li", {}, o))) : ""))));
    }
    return box;
  }

  function article(item, s, selEntry) {
    const M = code(META.models, s.m), V = code(META.variants, s.v);
    const where = [...new Set([META.datasets[item.d], META.protocols[item.p], item.t >= 0 ? META.tasks[item.t] : null,
                   item.cat, item.dif].filter(Boolean))].join(" · ");
    const head = el("header", {}, el("span", { class: "where" }, where), " ", el("code", {}, item.id));
    if (item.nev) head.append(" ", el("span", { class: "evcount" }, `⚑ ${item.nev} sign${item.nev === 1 ? "" : "s"} of not listening`));
    const a = el("article", { class: "item", tabindex: "0", id: `item-${item.i}`, "data-item": item.id,
                                "data-key": [META.protocols[item.p], META.datasets[item.d], item.id].join("|") }, head);
    if (selEntry && selEntry.changes && selEntry.changes[item.i]) a.append(el("p", { class: "changed" }, selEntry.changes[item.i]));
    if (item.q) a.append(el("p", { class: "q" }, item.q));
    a.append(truth(item));
    if (item.err) a.append(el("p", { class: "err" }, `item error · ${item.err[0]} · ${item.err[1]}: ${item.err[2]}`));
    const groups = item.g.filter((g) => (M === null || g[0] === M) && (V === null || g[1] === V));
    if (groups.length) {
      const conds = META.conditions.filter((_, ci) => groups.some((g) => g[5][ci]));
      const thead = el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "model"),
                                       conds.map((c) => el("th", { scope: "col" }, c))));
      const rows = groups.map((g) => {
        const label = [META.models[g[0]], META.variants[g[1]] === "default" ? null : META.variants[g[1]],
                       g[2] ? `option order ${g[2]}` : null].filter(Boolean);
        const th = el("th", { scope: "row" }, label.join(" · "));
        if (g[3]) th.append(el("div", { class: "spec" }, "options as shown: " + g[3].map((o, i) => `${"ABCDEFGHIJ"[i] || i + 1}. ${o}`).join("  ")));
        return el("tr", {}, th, conds.map((c) => cell(item, g[5][META.conditions.indexOf(c)], c, s, g)));
      });
      a.append(el("table", { class: "conds" }, thead, el("tbody", {}, rows)));
    }
    return a;
  }

  function pager(page, pages, total) {
    for (const nav of document.querySelectorAll(".pager")) {
      nav.replaceChildren();
      if (pages <= 1) continue;
      const go = (p) => () => { const s = readState(); s.page = p; writeState(s); };
      const prev = el("button", { type: "button", disabled: page <= 1 ? "" : null }, "← previous");
      prev.onclick = go(page - 1);
      const next = el("button", { type: "button", disabled: page >= pages ? "" : null }, "next →");
      next.onclick = go(page + 1);
      nav.append(prev, ` page ${page} of ${pages} `, next);
    }
  }

  async function render() {
    const mine = ++token;
    const s = readState();
    syncForm(s);
    let list = null;
    try {
      if (needsIndex(s)) {
        say("Filtering…");
        list = await matches(s);
      }
    } catch (err) {
      say(String(err));
      return;
    }
    if (mine !== token) return;
    chips(s); // after the selection named in the state, if any, has loaded
    const total = list ? list.length : META.items;
    const pages = Math.max(1, Math.ceil(total / PAGE));
    const page = Math.min(s.page, pages);
    const lo = (page - 1) * PAGE, hi = Math.min(total, page * PAGE);
    const ords = list ? list.slice(lo, hi) : Array.from({ length: hi - lo }, (_, i) => lo + i);
    const shards = [...new Set(ords.map((o) => Math.floor(o / META.per_data)))];
    try {
      await Promise.all(shards.map(dataShard));
    } catch (err) {
      say(String(err));
      return;
    }
    if (mine !== token) return;
    const selEntry = s.sel ? entryOf(s.sel) : null;
    const main = document.getElementById("items");
    main.replaceChildren(...ords.map((o) => article(DATA[Math.floor(o / META.per_data)][o % META.per_data], s, selEntry)));
    pager(page, pages, total);
    const of = total === META.items ? `${total} items` : `${total} of ${META.items} items`;
    say(total ? `${of} · showing ${lo + 1}–${hi}` : `${of}: none matches these filters`);
    document.body.dataset.total = String(total);
    document.body.dataset.shown = String(ords.length);
    document.body.dataset.ready = String(mine);
    document.body.dataset.state = location.hash.slice(1); // what the shown rows answer (tests wait for it)
    if (EVB.firstShown === undefined) EVB.firstShown = performance.now(); // ms from navigation to the first rows
  }

  // ------------------------------------------------------------------ the form, chips and keys

  function options(select, values, all) {
    select.replaceChildren(el("option", { value: "" }, all), ...values.map((v) => el("option", { value: v }, v)));
  }

  function syncForm(s) {
    const f = document.getElementById("filters");
    for (const k of ["p", "d", "t", "m", "c", "o", "sort"]) f.elements[k].value = s[k] || "";
    f.elements.ev.checked = !!s.ev;
  }

  function chips(s) {
    const box = document.getElementById("chips");
    box.replaceChildren();
    const named = { v: "variant", pair: "scored under correct and", sel: "selection" };
    for (const k of ["v", "pair", "sel"]) {
      if (!s[k]) continue;
      let text = `${named[k]}: ${s[k]}`;
      if (k === "sel") {
        const [name] = selParts(s.sel);
        const e = entryOf(s.sel);
        if (e) text = `${SELECTIONS[name].label}: ${e.label}`;
      }
      const b = el("button", { type: "button", class: "chip", title: "remove this filter" }, text + " ✕");
      b.onclick = () => { const t = readState(); delete t[k]; t.page = 1; writeState(t); };
      box.append(b);
    }
  }

  function play(button) {
    const a = el("audio", { controls: "", preload: "auto", src: `browser/clips/${button.dataset.clip}`,
                            "aria-label": button.getAttribute("aria-label"), "data-seconds": button.dataset.seconds });
    button.replaceWith(a);
    a.play().catch(() => {});
    return a;
  }
  EVB.play = play;

  function focusItem(step) {
    const items = [...document.querySelectorAll("article.item")];
    if (!items.length) return;
    const i = items.indexOf(document.activeElement.closest ? document.activeElement.closest("article.item") : null);
    const next = items[Math.max(0, Math.min(items.length - 1, i < 0 ? 0 : i + step))];
    next.focus();
    next.scrollIntoView({ block: "nearest" });
  }

  function keys(ev) {
    const t = ev.target;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (t && (t.tagName === "SELECT" || t.tagName === "INPUT" || t.tagName === "AUDIO")) {
      if (ev.key === "Escape") t.blur();
      return;
    }
    const s = readState();
    if (ev.key === "j" || ev.key === "ArrowDown" && t.closest && t.closest("article.item")) focusItem(1);
    else if (ev.key === "k" || ev.key === "ArrowUp" && t.closest && t.closest("article.item")) focusItem(-1);
    else if (ev.key === "n") { const b = document.querySelector(".pager button:last-child"); if (b && !b.disabled) b.click(); }
    else if (ev.key === "p") { const b = document.querySelector(".pager button"); if (b && !b.disabled) b.click(); }
    else if (ev.key === "e") { s.ev = s.ev ? "" : "1"; s.page = 1; writeState(s); }
    else if (ev.key === "/") { document.getElementById("filters").elements.p.focus(); }
    else if (ev.key === "Escape") { writeState({ page: 1 }); }
    else if (ev.key === "a") {
      const it = t.closest ? t.closest("article.item") : null;
      const audio = it && it.querySelector("audio");
      const button = it && it.querySelector("button.play");
      if (audio) { if (audio.paused) audio.play(); else audio.pause(); } else if (button) play(button);
    } else return;
    ev.preventDefault();
  }

  function start() {
    const f = document.getElementById("filters");
    options(f.elements.p, META.protocols, "all");
    options(f.elements.d, META.datasets, "all");
    options(f.elements.t, META.tasks, "all");
    options(f.elements.m, META.models, "all");
    options(f.elements.c, META.conditions, "all");
    options(f.elements.o, META.outcomes.filter((o) => META.present_outcomes.includes(o)), "any");
    document.getElementById("run-line").textContent = META.line;
    document.getElementById("specs").textContent = "What each model heard: " + Object.entries(META.specs)
      .map(([m, s]) => `${m} ${s}`).join(" · ") + ". Each player plays the clip as its model heard it.";
    f.addEventListener("change", () => {
      const s = readState();
      for (const k of ["p", "d", "t", "m", "c", "o", "sort"]) s[k] = f.elements[k].value;
      s.ev = f.elements.ev.checked ? "1" : "";
      s.page = 1;
      writeState(s);
    });
    document.getElementById("clear").onclick = () => writeState({ page: 1 });
    document.getElementById("items").addEventListener("click", (ev) => {
      const b = ev.target.closest && ev.target.closest("button.play");
      if (b) play(b);
    });
    window.addEventListener("hashchange", render);
    document.addEventListener("keydown", keys);
    render();
  }
})();
