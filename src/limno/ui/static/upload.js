// limno web UI: upload files to a file pool by drag-and-drop or a file input.
// Each file is one POST of its raw bytes (staged on the branch); the page then reloads
// to show the staged changes and the commit form.
"use strict";

async function uploadAll(zone, files) {
  const status = zone.querySelector("[data-upload-status]");
  const csrf = document.body.dataset.csrf;
  let done = 0;
  for (const file of files) {
    status.textContent = `uploading ${file.name} (${done + 1} of ${files.length})`;
    const url = zone.dataset.upload + "?" + new URLSearchParams({
      branch: zone.dataset.branch, path: zone.dataset.prefix + file.name,
    });
    const answer = await fetch(url, {
      method: "POST", body: file, credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, "Content-Type": file.type || "application/octet-stream" },
    });
    if (!answer.ok) {
      const text = new DOMParser().parseFromString(await answer.text(), "text/html");
      const error = text.querySelector("[data-testid=error]");
      status.textContent = `${file.name}: ${error ? error.textContent : answer.status}`;
      return;
    }
    done += 1;
  }
  status.textContent = `uploaded ${done} file(s)`;
  window.location.reload();
}

document.addEventListener("DOMContentLoaded", () => {
  for (const zone of document.querySelectorAll("[data-upload]")) {
    const input = zone.querySelector("input[type=file]");
    input.addEventListener("change", () => uploadAll(zone, Array.from(input.files)));
    zone.addEventListener("dragover", (event) => {
      event.preventDefault();
      zone.classList.add("over");
    });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (event) => {
      event.preventDefault();
      zone.classList.remove("over");
      uploadAll(zone, Array.from(event.dataTransfer.files));
    });
  }
});
