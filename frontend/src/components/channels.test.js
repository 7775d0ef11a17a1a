import { afterEach, describe, expect, it } from "vitest";
import { mount } from "@vue/test-utils";
import NotificationChannels from "./NotificationChannels.vue";
import { channelDestination, channelKindsLabel, webhookUrlProblem } from "../channels.js";
import { json, mockFetch, settle } from "../test-utils.js";

let wrapper;
afterEach(() => wrapper?.unmount());

const URL = "https://hooks.slack.com/services/T000/B000/" + "s".repeat(24);
const CHANNEL = {
  id: 7,
  name: "ops",
  kind: "slack",
  url_host: "hooks.slack.com",
  url_fingerprint: "ssss",
  min_level: "warning",
  kinds: ["pool_exhausted"],
  enabled: true,
};

describe("channels.js", () => {
  it.each([
    ["", "Paste the webhook URL."],
    ["ftp://h.test/x", "A webhook URL starts with https:// (or http://) and a host."],
    ["https://h.test/a b", "A webhook URL is one line without spaces."],
    ["not a url", "A webhook URL is one line without spaces."],
    ["https://hooks.slack.com/services/x", ""],
  ])("checks %j before sending it", (url, problem) => {
    expect(webhookUrlProblem(url)).toBe(problem);
  });

  it("shows only the host and last four of a URL, and names the kinds", () => {
    expect(channelDestination(CHANNEL)).toBe("hooks.slack.com …ssss");
    expect(channelKindsLabel([])).toBe("every kind");
    expect(channelKindsLabel(["pool_exhausted", "custom"])).toBe("No credential could serve a turn, custom");
  });
});

describe("NotificationChannels", () => {
  it("adds a channel, then forgets the URL and shows only its host and fingerprint", async () => {
    const { calls } = mockFetch({
      "GET /api/notification-channels": json(200, []),
      "POST /api/notification-channels": json(201, CHANNEL),
    });
    wrapper = mount(NotificationChannels);
    await settle();
    expect(wrapper.find("[data-testid=channels-empty]").exists()).toBe(true);
    await wrapper.find("#channel-name").setValue("ops");
    await wrapper.find("#channel-url").setValue(URL);
    await wrapper.find("input[value=pool_exhausted]").setValue(true);
    await wrapper.find("[data-testid=channel-form]").trigger("submit");
    await settle();
    const post = calls.find((c) => c.method === "POST");
    expect(post.body).toEqual({ name: "ops", kind: "slack", url: URL, min_level: "warning", kinds: ["pool_exhausted"] });
    expect(wrapper.find("#channel-url").element.value).toBe("");
    expect(wrapper.find("[data-testid=destination]").text()).toBe("hooks.slack.com …ssss");
    expect(wrapper.html()).not.toContain(URL);
  });

  it("refuses a bad URL before sending it", async () => {
    const { calls } = mockFetch({ "GET /api/notification-channels": json(200, []) });
    wrapper = mount(NotificationChannels);
    await settle();
    await wrapper.find("#channel-name").setValue("ops");
    await wrapper.find("#channel-url").setValue("ftp://x.test/hook");
    await wrapper.find("[data-testid=channel-form]").trigger("submit");
    await settle();
    expect(wrapper.find("#channel-url-error").text()).toContain("starts with https://");
    expect(calls.some((c) => c.method === "POST")).toBe(false);
  });

  it("sends a test and says what the receiver answered, then lists the attempts", async () => {
    const { calls } = mockFetch({
      "GET /api/notification-channels": json(200, [CHANNEL]),
      "POST /api/notification-channels/7/test": json(200, { number: 1, delivered: false, status_code: 500, error: "HTTP 500: down", retry_in_seconds: null }),
      "GET /api/notification-channels/7/deliveries": json(200, [
        {
          id: 3,
          status: "delivered",
          notification_title: "No credential could serve a turn",
          attempts: 3,
          attempt_log: [
            { number: 1, at: "2026-11-30T12:00:00Z", status_code: 500, error: "HTTP 500", delivered: false, retry_in_seconds: 30 },
            { number: 2, at: "2026-11-30T12:00:30Z", status_code: 500, error: "HTTP 500", delivered: false, retry_in_seconds: 60 },
            { number: 3, at: "2026-11-30T12:01:30Z", status_code: 200, error: "", delivered: true, retry_in_seconds: null },
          ],
        },
      ]),
    });
    wrapper = mount(NotificationChannels);
    await settle();
    const buttons = wrapper.findAll("tr[data-channel=ops] button");
    await buttons.find((b) => b.text() === "Send test").trigger("click");
    await settle();
    expect(wrapper.find("[data-testid=row-message]").text()).toBe("Test not delivered: HTTP 500: down.");
    expect(calls.some((c) => c.method === "POST" && c.url === "/api/notification-channels/7/test")).toBe(true);
    await buttons.find((b) => b.text() === "Deliveries").trigger("click");
    await settle();
    const attempts = wrapper.findAll("[data-testid=deliveries] li li").map((li) => li.text());
    expect(attempts).toHaveLength(3);
    expect(attempts[0]).toContain("retried after 30 s");
    expect(attempts[2]).toContain("delivered");
  });

  it("turns a channel off through the API and deletes only on confirmation", async () => {
    const { calls } = mockFetch({
      "GET /api/notification-channels": json(200, [CHANNEL]),
      "PATCH /api/notification-channels/7": json(200, { ...CHANNEL, enabled: false }),
      "DELETE /api/notification-channels/7": { status: 204, body: null },
    });
    wrapper = mount(NotificationChannels);
    await settle();
    await wrapper.find("#channel-enabled-7").setValue(false);
    await settle();
    expect(calls.find((c) => c.method === "PATCH").body).toEqual({ enabled: false });
    const del = () => wrapper.findAll("tr[data-channel=ops] button").find((b) => b.text().startsWith("Delete"));
    await del().trigger("click");
    expect(calls.some((c) => c.method === "DELETE")).toBe(false);
    await del().trigger("click"); // "Delete ops" confirms
    await settle();
    expect(calls.some((c) => c.method === "DELETE")).toBe(true);
    expect(wrapper.find("tr[data-channel=ops]").exists()).toBe(false);
  });
});
