// A hash router for the panel's pages: reloads and deep links work without any server routes
// beyond "/". Besides the pages in the nav, two views open from a row: an agent's console
// (#/agents/<name>/console?owner=<owner>) and a turn's replay (#/executions/<id>).
import { computed, ref } from "vue";

export const PAGES = [
  { id: "subscriptions", label: "Subscriptions" },
  { id: "settings", label: "Settings" },
  { id: "agents", label: "Agents" },
  { id: "schedules", label: "Schedules" },
  { id: "activity", label: "Activity" },
  { id: "gateway", label: "Gateway" },
  // Admins only: the nav shows it to them alone (App.vue), the API answers them alone.
  { id: "audit", label: "Audit", admin: true },
];

/**
 * The route a hash names: {page, section, params, query}. `page` is a nav page's id,
 * "console" or "replay"; `section` is the nav page it belongs to. Anything unknown is
 * the first page.
 */
export function routeFromHash(hash) {
  const [path, search = ""] = (hash || "").replace(/^#\/?/, "").split("?");
  const parts = path.split("/").map((p) => safeDecode(p));
  const query = Object.fromEntries(new URLSearchParams(search));
  if (parts[0] === "agents" && parts[1] && parts[2] === "console") {
    return { page: "console", section: "agents", params: { name: parts[1] }, query };
  }
  if (parts[0] === "executions" && parts[1]) {
    return { page: "replay", section: "activity", params: { id: parts[1] }, query };
  }
  const page = PAGES.some((p) => p.id === parts[0]) ? parts[0] : PAGES[0].id;
  return { page, section: page, params: {}, query };
}

function safeDecode(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

export function pageFromHash(hash) {
  return routeFromHash(hash).page;
}

/** The console of an agent (an /api/agents item or {name, owner}). */
export function consoleHref(agent) {
  const owner = agent.owner ? `?owner=${encodeURIComponent(agent.owner)}` : "";
  return `#/agents/${encodeURIComponent(agent.name)}/console${owner}`;
}

/** The replay of an execution. */
export function replayHref(executionId) {
  return `#/executions/${encodeURIComponent(executionId)}`;
}

/** The Schedules page with an agent's schedules first and its form on it. */
export function schedulesHref(agent) {
  const query = new URLSearchParams({ agent: agent.name, ...(agent.owner ? { owner: agent.owner } : {}) });
  return `#/schedules?${query}`;
}

const current = ref(routeFromHash(typeof window === "undefined" ? "" : window.location.hash));

if (typeof window !== "undefined") {
  window.addEventListener("hashchange", () => {
    current.value = routeFromHash(window.location.hash);
  });
}

/** The current route (reactive). */
export function useCurrentRoute() {
  return current;
}

/** The current page's id (reactive). */
export function useCurrentPage() {
  return computed(() => current.value.page);
}
