// The API's 400 "fields" ({field: "field: rule; field: rule"}, ledger.api.errors) said as sentences
// a person understands, with the field's label from the form ("Max pages must be a whole
// number."). The API's bodies stay as they are (scripts read them); only the page rewords.
// No DOM here: tests/web/test_plain_errors.py runs it under node against the API's own wording.

const RULES = [
  [/^must be a JSON integer\b/, (l) => `${l} must be a whole number.`],
  // the API's own wording (ledger.api.errors._PLAIN), then pydantic's (an older ledger)
  [/^must be at least (-?\d+)$/, (l, n) => `${l} must be ${n} or more.`],
  [/^must be at most (-?\d+)$/, (l, n) => `${l} must be ${n} or less.`],
  [/^give at least 1 item$/, (l, _n, field) => field === "seeds" ? "Give at least one seed URL." : `${l} needs at least one entry.`],
  [/^give at least (\d+) items$/, (l, n) => `${l} needs at least ${n} entries.`],
  [/^give at most (\d+) items?$/, (l, n) => `${l} takes at most ${n} entries.`],
  [/^must be true or false\b/, (l) => `${l} must be ticked or not.`],
  [/^must (.+?)\.?$/, (l, rest) => `${l} must ${rest}.`],
  [/^Input should be greater than or equal to (-?\d+)$/, (l, n) => `${l} must be ${n} or more.`],
  [/^Input should be less than or equal to (-?\d+)$/, (l, n) => `${l} must be ${n} or less.`],
  [/^Input should be greater than (-?\d+)$/, (l, n) => `${l} must be more than ${n}.`],
  [/^Input should be less than (-?\d+)$/, (l, n) => `${l} must be less than ${n}.`],
  [/^List should have at least 1 item/, (l, _n, field) => field === "seeds" ? "Give at least one seed URL." : `${l} needs at least one entry.`],
  [/^List should have at least (\d+) items?/, (l, n) => `${l} needs at least ${n} entries.`],
  [/^List should have at most (\d+) items?/, (l, n) => `${l} takes at most ${n} entries.`],
  [/^String should have at least 1 character/, (l) => `${l} must not be empty.`],
  [/^Input should be a valid boolean/, (l) => `${l} must be ticked or not.`],
  [/^is required$/, (l) => `${l} is needed.`],
  [/^provide exactly one of seeds or fromTargets$/, () => "Give seed URLs, or tick Saved targets (not both)."],
  [/^Input should be (.+?)\.?$/, (l, rest) => `${l} must be ${rest}.`],  // other pydantic rules, said of the label
  [/^(?:Input|List|String) should (.+?)\.?$/, (l, rest) => `${l} should ${rest}.`],
];

function sentence(text) {
  const t = text.trim();
  if (!t) return t;
  return t[0].toUpperCase() + t.slice(1) + (/[.!?]$/.test(t) ? "" : ".");
}

// One problem ("maxPages: Input should be …", "seeds.0: …" or a sentence of the ledger's own)
// → a sentence. ``labels``: {field name: label shown on the form}.
export function plainProblem(field, problem, labels) {
  const label = labels[field] || field;
  let rest = problem.trim();
  const prefix = rest.match(/^([A-Za-z]+)(?:\.(\d+))?(?:\.[A-Za-z.]+)?: /);
  let where = label;
  if (prefix && (prefix[1] === field || prefix[1] === "body")) {
    rest = rest.slice(prefix[0].length);
    if (prefix[2] !== undefined) where = label + " (line " + (Number(prefix[2]) + 1) + ")";
  }
  for (const [pattern, say] of RULES) {
    const m = rest.match(pattern);
    if (m) return say(where, m[1], field);
  }
  // the ledger's own wording names the field by its API name at the start: use the label
  if (rest.startsWith(field + " ")) rest = label + rest.slice(field.length);
  rest = rest.replace(/ \(WAGGLE_[A-Z_]+\)/g, "");
  return sentence(rest);
}

// "a; b" of one field → its sentences, joined.
export function plainField(field, message, labels) {
  return [...new Set(String(message).split(/; (?=[A-Za-z]+(?:\.\d+)?: )/).map((p) => plainProblem(field, p, labels)))].join(" ");
}
