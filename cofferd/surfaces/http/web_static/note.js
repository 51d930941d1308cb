// A note's page: the copy button of "open in editor" (the note's own HTML holds no script,
// no button and no data- attribute: this finds only the page's own).
"use strict";

(function () {
  const button = document.querySelector("aside.beside button[data-copy]");
  if (!button || !navigator.clipboard) return;
  button.hidden = false;
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(button.dataset.copy);
      button.textContent = "copied";
    } catch (e) {
      button.textContent = "the browser refused to copy";
    }
  });
})();
