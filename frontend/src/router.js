// A hash router for the panel's pages: reloads and deep links work without any server routes
// beyond "/".
import { ref } from "vue";

export const PAGES = [
  { id: "subscriptions", label: "Subscriptions" },
  { id: "settings", label: "Settings" },
  { id: "agents", label: "Agents" },
  { id: "schedules", label: "Schedules" },
  { id: "activity", label: "Activity" },
  { id: "gateway", label: "Gateway" },
];

export function pageFromHash(hash) {
  const id = (hash || "").replace(/^#\/?/, "").split(/[/?]/)[0];
  return PAGES.some((p) => p.id === id) ? id : PAGES[0].id;
}

const current = ref(pageFromHash(typeof window === "undefined" ? "" : window.location.hash));

if (typeof window !== "undefined") {
  window.addEventListener("hashchange", () => {
    current.value = pageFromHash(window.location.hash);
  });
}

export function useCurrentPage() {
  return current;
}
