// The graph page's layout worker: ForceAtlas2 (graphology-layout-forceatlas2's own
// iteration, vendor/forceatlas2-iterate.js) for a bounded number of iterations or time,
// off the page's thread. It sends the positions it has every `batchMs`, so the picture
// settles as one watches (each sending redraws the graph: not too often), and stops.
"use strict";

var module = { exports: {} }; // the iteration is a CommonJS module
importScripts("/static/vendor/forceatlas2-iterate.js");
const iterate = module.exports;

function positions(nodes) {
  const order = nodes.length / 10;
  const out = new Float32Array(order * 2);
  for (let i = 0; i < order; i++) {
    out[i * 2] = nodes[i * 10];
    out[i * 2 + 1] = nodes[i * 10 + 1];
  }
  return out;
}

self.onmessage = (event) => {
  const { nodes, edges, settings, iterations, budgetMs, batchMs } = event.data;
  const until = performance.now() + budgetMs;
  let done = 0;
  function batch() {
    const started = performance.now();
    while (done < iterations && performance.now() - started < batchMs) {
      iterate(settings, nodes, edges);
      done++;
    }
    const over = done >= iterations || performance.now() >= until;
    const out = positions(nodes);
    self.postMessage({ positions: out, done: over, iterations: done }, [out.buffer]);
    if (!over) setTimeout(batch, 0);
  }
  batch();
};
