// Sort a table by a click on its header (numbers by value, text alphabetically; again to reverse), and
// say so plainly where a figure did not load.
function cellValue(cell, numeric) {
  const text = cell.textContent.trim();
  if (!numeric) { return text.toLowerCase(); }
  const match = text.replace(/,/g, "").match(/[+-]?\d+(\.\d+)?/);
  return match ? parseFloat(match[0]) : -Infinity;
}

function sortTable(table, header, column) {
  const numeric = header.dataset.type === "num";
  const ascending = header.getAttribute("aria-sort") !== "ascending";
  table.querySelectorAll("th").forEach(function (h) { h.setAttribute("aria-sort", "none"); });
  header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort(function (a, b) {
    const x = cellValue(a.cells[column], numeric);
    const y = cellValue(b.cells[column], numeric);
    return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
  });
  rows.forEach(function (row) { body.appendChild(row); });
}

document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (header, column) {
    header.setAttribute("aria-sort", "none");
    header.title = "sort by this column";
    header.addEventListener("click", function () { sortTable(table, header, column); });
  });
});

window.addEventListener("load", function () {
  document.querySelectorAll("img").forEach(function (img) {
    const loaded = img.complete && img.naturalWidth > 0;
    img.dataset.loaded = loaded ? "yes" : "no";
    if (!loaded) {
      img.classList.add("broken");
      const note = document.createElement("p");
      note.className = "warning";
      note.textContent = "figure not loaded: " + img.alt;
      img.after(note);
    }
  });
});
