// Sign in with an API token (`loom tokens create`, or the admin token the server started with).
import { useState } from "preact/hooks";
import { api, token } from "../api.js";
import { html } from "../html.js";

export function SignIn({ onSignedIn, notice }) {
  const [value, setValue] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event) => {
    event.preventDefault();
    const candidate = value.trim();
    if (!candidate) {
      setError("Enter your API token");
      return;
    }
    setBusy(true);
    setError(null);
    try {
      // The token goes to the server once; it keeps it in a cookie the page cannot read.
      const user = await api("/v1/session", { method: "POST", bearer: candidate });
      token.set();
      onSignedIn(user);
    } catch (caught) {
      setError(caught.status === 401 ? "That token was not accepted" : caught.message);
      setBusy(false);
    }
  };

  return html`<section class="signin" aria-labelledby="signin-title">
    <h1 id="signin-title" tabindex="-1">Sign in to Loom</h1>
    ${notice && html`<p class="notice" role="status">${notice}</p>`}
    <form onSubmit=${submit} novalidate>
      <div class="field">
        <label for="token">API token</label>
        <input
          id="token"
          type="password"
          autocomplete="current-password"
          value=${value}
          onInput=${(e) => setValue(e.currentTarget.value)}
          aria-invalid=${error ? "true" : undefined}
          aria-describedby=${error ? "token-error token-hint" : "token-hint"}
        />
        <p class="hint" id="token-hint">
          On a new platform, the admin's token is in <code>~/.loom/token</code> (the server's${" "}
          <code>LOOM_HOME</code>). Make more with <code>loom tokens create</code>, or ask an admin
          for one. It stays in this browser until you sign out.
        </p>
      </div>
      ${error && html`<p class="error" role="alert" id="token-error">${error}</p>`}
      <button type="submit" class="primary" disabled=${busy}>Sign in</button>
    </form>
  </section>`;
}
