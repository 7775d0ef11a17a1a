// The growing lists (GET /api/executions, /api/notifications) answer a page at a time:
// {next, previous, results}, newest first, where `next` is the URL of the older page.

/** The cursor of a page URL (the server's `next`), or null when there is no older page. */
export function cursorOf(url) {
  if (!url) return null;
  return new URL(url, "http://panel.invalid").searchParams.get("cursor");
}

/** `path` with the non-empty `params` and, for an older page, its cursor. */
export function pageUrl(path, params = {}, cursor = null) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v));
  if (cursor) query.set("cursor", cursor);
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/**
 * Append the page older than `list.older` to `list.items` (both refs), fetched by
 * `fetchPage(cursor)`; `list.loading` is set meanwhile, and a failure goes to
 * `list.error`, naming the `noun` of the list.
 */
export async function loadOlder(list, fetchPage, noun) {
  list.loading.value = true;
  list.error.value = "";
  try {
    const page = await fetchPage(list.older.value);
    list.items.value = [...list.items.value, ...page.results];
    list.older.value = cursorOf(page.next);
  } catch (e) {
    list.error.value = `Couldn't load older ${noun}: ${e.message}`;
  } finally {
    list.loading.value = false;
  }
}
