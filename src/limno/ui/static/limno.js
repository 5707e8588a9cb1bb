// limno web UI: confirmation dialogs and live updates. Plain JS, no library.
"use strict";

// -- confirmation: a form with data-confirm asks first, in a <dialog> ------------------
function confirmDialog(text) {
  return new Promise((resolve) => {
    const dialog = document.createElement("dialog");
    dialog.setAttribute("aria-labelledby", "confirm-text");
    const p = document.createElement("p");
    p.id = "confirm-text";
    p.textContent = text;
    const yes = document.createElement("button");
    yes.textContent = "Yes, do it";
    yes.className = "danger";
    const no = document.createElement("button");
    no.textContent = "Cancel";
    no.className = "secondary";
    const row = document.createElement("form");
    row.method = "dialog";
    row.className = "row";
    row.append(yes, no);
    dialog.append(p, row);
    document.body.append(dialog);
    yes.addEventListener("click", () => { dialog.returnValue = "yes"; });
    no.addEventListener("click", () => { dialog.returnValue = "no"; });
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "yes");
      dialog.remove();
    });
    dialog.showModal();
    no.focus();
  });
}

document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.dataset.confirm || form.dataset.confirmed) {
    return;
  }
  event.preventDefault();
  if (await confirmDialog(form.dataset.confirm)) {
    if (form.elements.confirm && form.elements.name) {
      form.elements.confirm.value = form.elements.name.value;
    }
    form.dataset.confirmed = "1";
    form.requestSubmit();
  }
});

// -- live updates: parts of a page marked data-live-region reload on lake events -------
const EVENT_TYPES = [
  "commit", "pool.created", "pool.renamed", "pool.updated", "pool.dropped",
  "branch.created", "branch.moved", "branch.deleted", "branch.protected",
  "branch.unprotected", "tag.created", "tag.deleted", "job.created", "job.started",
  "job.finished", "job.committed", "job.failed",
  "merge_request.opened", "merge_request.merged", "merge_request.closed",
];

async function refreshRegions(status) {
  // a refresh only reads: an action asked for in the address (a verify run) is not repeated
  const url = new URL(window.location.href);
  url.searchParams.delete("verify");
  const answer = await fetch(url, { credentials: "same-origin" });
  if (!answer.ok) return;
  const fresh = new DOMParser().parseFromString(await answer.text(), "text/html");
  for (const region of document.querySelectorAll("[data-live-region]")) {
    const name = region.dataset.liveRegion;
    const replacement = fresh.querySelector(`[data-live-region="${name}"]`);
    if (replacement && replacement.innerHTML !== region.innerHTML) {
      region.innerHTML = replacement.innerHTML;
    }
  }
  if (status) status.textContent = "updated " + new Date().toLocaleTimeString();
}

function listen(root) {
  const pool = root.dataset.livePool;
  const status = root.querySelector("[data-live-status]");
  const url = "/events" + (pool ? "?pool=" + encodeURIComponent(pool) : "");
  const source = new EventSource(url);
  let timer = null;
  const feed = document.querySelector("[data-live-feed]");
  const changed = (event) => {
    if (feed && event && event.data) {
      const told = JSON.parse(event.data);
      const item = document.createElement("li");
      item.textContent = `${told.time} ${told.type} ${told.pool || ""} ${JSON.stringify(told.data)}`;
      feed.prepend(item);
      while (feed.children.length > 100) feed.lastChild.remove();
    }
    clearTimeout(timer);
    timer = setTimeout(() => refreshRegions(status).catch(() => {}), 150);
  };
  for (const type of EVENT_TYPES) source.addEventListener(type, changed);
  source.addEventListener("open", () => {
    if (status) status.textContent = "live";
    document.body.dataset.live = "open";
  });
  source.addEventListener("error", () => { if (status) status.textContent = "reconnecting"; });
  window.addEventListener("pagehide", () => source.close());
}

document.addEventListener("DOMContentLoaded", () => {
  const live = document.querySelector("[data-live-pool]");
  if (live) listen(live);
  else if (document.querySelector("[data-live-feed]")) listen(document.querySelector("main"));
});
