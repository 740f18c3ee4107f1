// memstack dashboard: the knowledge graph drawn in SVG with a small force layout (no library).
// Data comes from <script type="application/json" id="graph-data">; every text is set with
// textContent, never as markup. Drag the background to pan, the wheel (or the +/- keys) to zoom,
// click a node or an edge to see its evidence. Sets data-ready (the node count) when drawn and
// data-layout-ms (the layout's time: bench/ui.py --graph reads it).
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const LABELS = 120;

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (parent) parent.appendChild(node);
    return node;
  }

  // Fruchterman-Reingold with cooling, made linear in the nodes: repulsion only between nodes in
  // neighbouring cells of a grid of cell size 1.5k (beyond that it is weak, and the pull to the
  // centre keeps the parts together), a fixed number of iterations that shrinks as the graph
  // grows, and a start where the best linked nodes sit in the middle (a sunflower spiral by
  // degree), so the layout settles fast and a page draws the same graph every time it is opened.
  function layout(nodes, edges, width, height) {
    const n = nodes.length;
    const k = Math.sqrt((width * height) / Math.max(1, n)) * 0.75;
    const order = nodes.map((d, i) => i).sort((a, b) => nodes[b].degree - nodes[a].degree || (nodes[a].id < nodes[b].id ? -1 : 1));
    const spread = Math.min(width, height) * 0.45, golden = Math.PI * (3 - Math.sqrt(5));
    order.forEach((i, rank) => {
      const r = spread * Math.sqrt((rank + 0.5) / Math.max(1, n));
      nodes[i].x = width / 2 + r * Math.cos(rank * golden);
      nodes[i].y = height / 2 + r * Math.sin(rank * golden);
    });
    const index = new Map(nodes.map((d, i) => [d.id, i]));
    const links = edges.map((e) => [index.get(e.source), index.get(e.target)]).filter(([a, b]) => a !== undefined && b !== undefined && a !== b);
    const iterations = n <= 100 ? 300 : n <= 400 ? 120 : 90;
    const cell = 1.5 * k, reach2 = cell * cell;
    const xs = new Float64Array(n), ys = new Float64Array(n), dx = new Float64Array(n), dy = new Float64Array(n);
    const home = new Int32Array(n), sorted = new Int32Array(n);
    nodes.forEach((d, i) => { xs[i] = d.x; ys[i] = d.y; });
    let t = width / 8;
    const cool = Math.pow(0.01, 1 / iterations);  // from width/8 to a hundredth of it
    for (let it = 0; it < iterations; it++) {
      dx.fill(0); dy.fill(0);
      // the grid: each node's cell, and the nodes sorted by cell (a counting sort)
      let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
      for (let i = 0; i < n; i++) { x0 = Math.min(x0, xs[i]); y0 = Math.min(y0, ys[i]); x1 = Math.max(x1, xs[i]); y1 = Math.max(y1, ys[i]); }
      const size = Math.max(cell, Math.sqrt(((x1 - x0 + 1) * (y1 - y0 + 1)) / (4 * n + 1)));  // at most ~4n cells
      const gw = Math.floor((x1 - x0) / size) + 1, gh = Math.floor((y1 - y0) / size) + 1;
      const start = new Int32Array(gw * gh + 1);
      for (let i = 0; i < n; i++) { home[i] = Math.floor((xs[i] - x0) / size) + Math.floor((ys[i] - y0) / size) * gw; start[home[i] + 1]++; }
      for (let c = 0; c < gw * gh; c++) start[c + 1] += start[c];
      const fill = start.slice(0, gw * gh);
      for (let i = 0; i < n; i++) sorted[fill[home[i]]++] = i;
      const reach = Math.ceil(cell / size);  // cells to look at on each side (1 unless the grid was coarsened)
      for (let i = 0; i < n; i++) {
        const cx = home[i] % gw, cy = (home[i] - cx) / gw;
        for (let oy = Math.max(0, cy - reach); oy <= Math.min(gh - 1, cy + reach); oy++) {
          for (let ox = Math.max(0, cx - reach); ox <= Math.min(gw - 1, cx + reach); ox++) {
            const c = ox + oy * gw;
            for (let p = start[c]; p < start[c + 1]; p++) {
              const j = sorted[p];
              if (j <= i) continue;
              let x = xs[i] - xs[j], y = ys[i] - ys[j];
              let d2 = x * x + y * y;
              if (d2 > reach2) continue;
              if (d2 < 0.01) { x = 0.1 * (i - j); y = 0.1; d2 = x * x + y * y; }
              const f = (k * k) / d2;
              dx[i] += x * f; dy[i] += y * f; dx[j] -= x * f; dy[j] -= y * f;
            }
          }
        }
      }
      for (const [a, b] of links) {
        const x = xs[a] - xs[b], y = ys[a] - ys[b];
        const d = Math.sqrt(x * x + y * y) || 0.01;
        const f = d / k;
        dx[a] -= x * f; dy[a] -= y * f; dx[b] += x * f; dy[b] += y * f;
      }
      for (let i = 0; i < n; i++) {
        dx[i] += (width / 2 - xs[i]) * 0.02 * k / 10;
        dy[i] += (height / 2 - ys[i]) * 0.02 * k / 10;
        const d = Math.sqrt(dx[i] * dx[i] + dy[i] * dy[i]) || 1;
        const step = Math.min(d, t);
        xs[i] += (dx[i] / d) * step;
        ys[i] += (dy[i] / d) * step;
      }
      t *= cool;
    }
    nodes.forEach((d, i) => { d.x = xs[i]; d.y = ys[i]; });
  }

  function draw(svg, data, words, info) {
    const nodes = data.nodes, edges = data.edges;
    const W = 1000, H = Math.round(1000 * Math.max(0.5, Math.min(2, (svg.clientHeight || 700) / (svg.clientWidth || 1000))));
    const started = performance.now();
    layout(nodes, edges, W, H);
    svg.dataset.layoutMs = (performance.now() - started).toFixed(1);
    const byId = new Map(nodes.map((d) => [d.id, d]));
    const world = el("g", { class: "world" }, svg);
    const edgeLayer = el("g", {}, world), labelLayer = el("g", {}, world), nodeLayer = el("g", {}, world);
    // every edge's label up to LABELS edges; past that, an edge shows its label while pointed at or selected
    const showLabels = edges.length <= LABELS;
    svg.dataset.labels = showLabels ? "all" : "hover";
    let selected = [];
    const select = (items) => {
      selected.forEach((s) => { s.classList.remove("selected"); if (s.label && !showLabels) s.label.remove(); });
      selected = items;
      items.forEach((s) => { s.classList.add("selected"); if (s.label) labelLayer.appendChild(s.label); });
    };
    function edgeLabel(e, a, b) {
      const text = el("text", { class: "edge-label", x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 3, "text-anchor": "middle" });
      text.textContent = e.label;
      return text;
    }

    function line(label, value) {
      const p = document.createElement("p");
      const b = document.createElement("b");
      b.textContent = label + ": ";
      p.appendChild(b);
      p.appendChild(document.createTextNode(value));
      return p;
    }
    function showEdge(e) {
      info.replaceChildren();
      const h = document.createElement("h3");
      h.textContent = byId.get(e.source).label + " —" + e.label + "→ " + byId.get(e.target).label;
      info.appendChild(h);
      if (e.alias) info.appendChild(line(words.alias, "✓"));
      if (e.past) info.appendChild(line(words.past, "✓"));
      info.appendChild(line(words.evidence, e.evidence || "—"));
      if (e.date) info.appendChild(line(words.date, e.date));
      if (e.confidence !== null && e.confidence !== undefined) info.appendChild(line(words.confidence, String(e.confidence)));
    }
    function showNode(d) {
      info.replaceChildren();
      const h = document.createElement("h3");
      h.textContent = d.label;
      info.appendChild(h);
      const ul = document.createElement("ul");
      for (const e of edges) {
        if (e.source !== d.id && e.target !== d.id) continue;
        const li = document.createElement("li");
        li.textContent = byId.get(e.source).label + " —" + e.label + "→ " + byId.get(e.target).label;
        if (e.evidence) { const q = document.createElement("q"); q.textContent = e.evidence; li.appendChild(document.createElement("br")); li.appendChild(q); }
        ul.appendChild(li);
      }
      info.appendChild(ul);
    }

    for (const e of edges) {
      const a = byId.get(e.source), b = byId.get(e.target);
      if (!a || !b) continue;
      const cls = "edge" + (e.alias ? " alias" : "") + (e.past ? " past" : "");
      const visible = el("line", { class: cls, x1: a.x, y1: a.y, x2: b.x, y2: b.y, "marker-end": "url(#arrow)" }, edgeLayer);
      const hit = el("line", { class: "edge hit", x1: a.x, y1: a.y, x2: b.x, y2: b.y, "data-label": e.label }, edgeLayer);
      el("title", {}, hit).textContent = a.label + " —" + e.label + "→ " + b.label + (e.evidence ? "\n" + e.evidence : "");
      hit.addEventListener("click", (ev) => { ev.stopPropagation(); visible.label = visible.label || edgeLabel(e, a, b); select([visible]); showEdge(e); });
      if (showLabels) {
        labelLayer.appendChild(edgeLabel(e, a, b));
      } else {
        hit.addEventListener("pointerenter", () => { visible.label = visible.label || edgeLabel(e, a, b); labelLayer.appendChild(visible.label); });
        hit.addEventListener("pointerleave", () => { if (!selected.includes(visible)) visible.label.remove(); });
      }
    }
    for (const d of nodes) {
      const g = el("g", { class: "node" + (d.id === "user" ? " self" : ""), transform: `translate(${d.x},${d.y})` }, nodeLayer);
      el("circle", { r: 5 + Math.min(10, Math.sqrt(d.degree) * 2) }, g);
      const text = el("text", { x: 9, y: 4 }, g);
      text.textContent = d.label;
      el("title", {}, g).textContent = d.label;
      g.addEventListener("click", (ev) => { ev.stopPropagation(); select([g]); showNode(d); });
    }
    const defs = el("defs", {}, svg);
    const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "18", refY: "5", markerWidth: "6", markerHeight: "6", orient: "auto-start-reverse" }, defs);
    el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#9aa4b5" }, marker);

    // fit the drawing, then pan and zoom by moving the viewBox
    const xs = nodes.map((d) => d.x), ys = nodes.map((d) => d.y);
    const pad = 60;
    let view = nodes.length
      ? { x: Math.min(...xs) - pad, y: Math.min(...ys) - pad, w: Math.max(...xs) - Math.min(...xs) + 2 * pad + 80, h: Math.max(...ys) - Math.min(...ys) + 2 * pad }
      : { x: 0, y: 0, w: W, h: H };
    const apply = () => svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
    apply();
    const zoom = (factor, cx, cy) => {
      view = { x: cx - (cx - view.x) * factor, y: cy - (cy - view.y) * factor, w: view.w * factor, h: view.h * factor };
      apply();
    };
    const point = (ev) => {
      const r = svg.getBoundingClientRect();
      return { x: view.x + ((ev.clientX - r.left) / r.width) * view.w, y: view.y + ((ev.clientY - r.top) / r.height) * view.h };
    };
    svg.addEventListener("wheel", (ev) => { ev.preventDefault(); const p = point(ev); zoom(ev.deltaY > 0 ? 1.15 : 1 / 1.15, p.x, p.y); }, { passive: false });
    let drag = null;
    svg.addEventListener("pointerdown", (ev) => { drag = { x: ev.clientX, y: ev.clientY, view: { ...view } }; });
    svg.addEventListener("pointermove", (ev) => {
      if (!drag) return;
      const r = svg.getBoundingClientRect();
      view = { ...drag.view, x: drag.view.x - ((ev.clientX - drag.x) / r.width) * view.w, y: drag.view.y - ((ev.clientY - drag.y) / r.height) * view.h };
      apply();
    });
    window.addEventListener("pointerup", () => { drag = null; });
    svg.setAttribute("tabindex", "0");
    svg.addEventListener("keydown", (ev) => {
      if (ev.key === "+" || ev.key === "=") zoom(1 / 1.2, view.x + view.w / 2, view.y + view.h / 2);
      if (ev.key === "-") zoom(1.2, view.x + view.w / 2, view.y + view.h / 2);
    });
    svg.dataset.ready = String(nodes.length);
  }

  document.addEventListener("DOMContentLoaded", () => {
    const svg = document.getElementById("graph");
    const source = document.getElementById("graph-data");
    if (!svg || !source) return;
    draw(svg, JSON.parse(source.textContent), JSON.parse(document.getElementById("graph-words").textContent), document.getElementById("graph-info"));
  });
})();
