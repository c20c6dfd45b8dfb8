'use strict';
// The sign-in page: trades an admin credential for a console session (an HttpOnly cookie), then loads the console.
document.getElementById('signin-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const error = document.getElementById('signin-error');
  error.hidden = true;
  const token = document.getElementById('token').value.trim();
  try {
    const response = await fetch('/cloudlet/console/api/signin', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token }),
      credentials: 'same-origin',
    });
    if (response.ok) {
      // The console, at the page the address names (a session that ended, by expiry or a server restart, left the
      // address as it was): the root again, which now serves the console.
      window.location.reload();
      return;
    }
    const body = await response.json().catch(() => ({}));
    error.textContent = body.reason || `Sign-in failed (HTTP ${response.status}).`;
  } catch (e) {
    error.textContent = `Cannot reach the server: ${e.message}`;
  }
  error.hidden = false;
});
