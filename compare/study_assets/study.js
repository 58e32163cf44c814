// The study page's one interactive part: any two kernels side by side. Each kernel's panes are pre-rendered in
// kernels/<name>.js (STUDY.put), loaded on demand with a <script> tag, which works from file:// with no server.
const STUDY = (() => {
  const parts = {}, waiting = {};
  const PARTS = ["src", "ptx", "sass", "stats", "bars"];
  function load(name) {
    if (parts[name]) return Promise.resolve(parts[name]);
    return new Promise((resolve, reject) => {
      (waiting[name] = waiting[name] || []).push(resolve);
      const s = document.createElement("script");
      s.src = "kernels/" + STUDY_KERNELS[name] + ".js";
      s.onerror = () => reject(new Error("could not load " + s.src));
      document.body.appendChild(s);
    });
  }
  function put(p) {
    parts[p.name] = p;
    (waiting[p.name] || []).forEach((f) => f(p));
    delete waiting[p.name];
  }
  function cell(cls, side, inner) {
    const d = document.createElement("div");
    d.className = "cell " + cls;
    d.dataset.side = side;
    d.innerHTML = inner;
    return d;
  }
  async function show(left, right) {
    const [l, r] = await Promise.all([load(left), load(right)]);
    const grid = document.getElementById("custom");
    grid.replaceChildren(cell("head", "left", "<h3></h3>"), cell("head", "right", "<h3></h3>"));
    grid.children[0].firstChild.textContent = l.name;
    grid.children[1].firstChild.textContent = r.name;
    for (const p of PARTS) grid.append(cell("part-" + p, "left", l[p]), cell("part-" + p, "right", r[p]));
    grid.dataset.pair = left + "|" + right;
  }
  function init() {
    const a = document.getElementById("pick-left"), b = document.getElementById("pick-right");
    if (!a || !b) return;
    const names = Object.keys(STUDY_KERNELS);
    a.value = STUDY_PAIR[0] || names[0];
    b.value = STUDY_PAIR[1] || names[1] || names[0];
    const go = () => show(a.value, b.value).catch((e) => {
      document.getElementById("custom").textContent = String(e);
    });
    a.addEventListener("change", go);
    b.addEventListener("change", go);
    go();
  }
  document.addEventListener("DOMContentLoaded", init);
  return { put, show };
})();
