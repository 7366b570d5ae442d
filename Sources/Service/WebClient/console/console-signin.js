// The console's sign-in: posts the token as the form would, and opens the console once the server set its cookie
// (its answer is a 303 to /console). A refusal's message is shown as text.
"use strict";

document.getElementById("signin").addEventListener("submit", async (event) => {
  event.preventDefault();
  const error = document.getElementById("signin-error");
  error.textContent = "";
  const body = new URLSearchParams({ token: document.getElementById("token").value });
  try {
    const response = await fetch("/console/session", { method: "POST", body, redirect: "manual",
                                                       credentials: "same-origin" });
    if (response.type === "opaqueredirect" || response.ok) {
      window.location.assign("/console");
      return;
    }
    const answer = await response.json().catch(() => ({}));
    error.textContent = answer.message || `Refused (${response.status}).`;
  } catch (failure) {
    error.textContent = "The server could not be reached.";
  }
});
