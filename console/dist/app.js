// Placeholder for the console's bundle (console/src/, built into console/dist/).
document.getElementById("status").textContent = "rankd console placeholder: app.js loaded";
