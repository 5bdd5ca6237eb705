// Templates as tagged strings (no JSX step): html`<p>${text}</p>`. Preact escapes every value.
import { h } from "preact";
import htm from "htm";

export const html = htm.bind(h);
