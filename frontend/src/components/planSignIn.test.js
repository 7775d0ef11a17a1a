import { afterEach, describe, expect, it, vi } from "vitest";
import { mount } from "@vue/test-utils";
import SubscriptionForm from "./SubscriptionForm.vue";
import PlanSignIn from "./PlanSignIn.vue";
import { json, mockFetch, settle } from "../test-utils.js";

const AUTHORIZE = "http://127.0.0.1:8100/oauth/authorize?client_id=x&state=s";
const STARTED = { flow: "f-1", provider: "claude", authorize_url: AUTHORIZE, expires_at: "2026-12-06T01:10:00Z" };

let wrapper;
let opened;
afterEach(() => {
  wrapper?.unmount();
  vi.unstubAllGlobals();
});

function stubOpen() {
  opened = [];
  vi.stubGlobal("open", (...args) => opened.push(args));
}

async function clickNamed(w, name) {
  const button = w.findAll("button").find((b) => b.text() === name);
  expect(button, name).toBeTruthy();
  await button.trigger("click");
  await settle();
}

describe("PlanSignIn", () => {
  it("starts the sign-in, opens the provider's page and registers the plan from the pasted code", async () => {
    stubOpen();
    const saved = { id: 7, name: "max", provider: "anthropic", token_fingerprint: "AAAA" };
    const { calls } = mockFetch({
      "POST /api/subscriptions/sign-in": json(201, STARTED),
      "POST /api/subscriptions/sign-in/f-1/code": json(201, saved),
    });
    wrapper = mount(SubscriptionForm);
    await wrapper.find("#add-name").setValue("max");
    await clickNamed(wrapper, "Sign in with Claude");
    expect(calls[0].body).toEqual({ provider: "claude", name: "max", plan_type: "pro" });
    expect(opened).toEqual([[AUTHORIZE, "_blank", "noopener"]]);
    await wrapper.find("#add-sign-in-code").setValue("  the-code#s \n");
    await clickNamed(wrapper, "Finish sign-in");
    expect(calls[1].body).toEqual({ pasted: "the-code#s" });
    expect(wrapper.emitted("saved")[0][0]).toEqual(saved);
  });

  it("offers ChatGPT for a Codex plan and asks for the callback address", async () => {
    stubOpen();
    const { calls } = mockFetch({ "POST /api/subscriptions/sign-in": json(201, { ...STARTED, provider: "chatgpt" }) });
    wrapper = mount(SubscriptionForm);
    await wrapper.find("#add-name").setValue("gpt");
    await wrapper.find("#add-provider").setValue("openai-codex");
    await clickNamed(wrapper, "Sign in with ChatGPT");
    expect(calls[0].body).toMatchObject({ provider: "chatgpt", plan_type: "pro" });
    expect(wrapper.text()).toContain("callback address");
  });

  it("asks for a name before starting anything", async () => {
    stubOpen();
    const { calls } = mockFetch({});
    wrapper = mount(SubscriptionForm);
    await clickNamed(wrapper, "Sign in with Claude");
    expect(calls).toHaveLength(0);
    expect(opened).toHaveLength(0);
    expect(wrapper.find("#add-name-error").text()).toMatch(/name is required/);
  });

  // The sign-in started, then the pasted code answered with ``answer``.
  async function pasteAnswered(answer, pasted = "c#s") {
    stubOpen();
    mockFetch({
      "POST /api/subscriptions/sign-in": json(201, STARTED),
      "POST /api/subscriptions/sign-in/f-1/code": answer,
    });
    wrapper = mount(PlanSignIn, { props: { idPrefix: "t", name: "max", provider: "anthropic", planType: "pro" } });
    await clickNamed(wrapper, "Sign in with Claude");
    await wrapper.find("#t-sign-in-code").setValue(pasted);
    await clickNamed(wrapper, "Finish sign-in");
    return wrapper.find("#t-sign-in-error").text();
  }

  it("shows a refused code next to the field, clears it and keeps the sign-in open", async () => {
    const error = await pasteAnswered(json(400, { pasted: ["The provider refused the code."] }), "bad#s");
    expect(error).toBe("The provider refused the code.");
    expect(wrapper.find("#t-sign-in-code").element.value).toBe("");
    expect(wrapper.emitted("saved")).toBeUndefined();
  });

  it("goes back to the start when the sign-in expired", async () => {
    const error = await pasteAnswered(json(404, { detail: "No sign-in of yours waits under this id.", code: "not_found" }));
    expect(error).toMatch(/No sign-in of yours/);
    expect(wrapper.find("#t-sign-in-code").exists()).toBe(false);
    expect(wrapper.findAll("button").map((b) => b.text())).toContain("Sign in with Claude");
  });

  it("a provider that does not answer is said as it is", async () => {
    const detail = "The claude sign-in service did not answer; try again.";
    const error = await pasteAnswered(json(502, { detail, code: "provider_unavailable" }));
    expect(error).toMatch(/did not answer/);
    expect(wrapper.find("#t-sign-in-code").exists()).toBe(true);
  });

  // The device-code sign-in: a short interval (the server says seconds) so the test
  // waits milliseconds for each poll.
  const SOON = new Date(Date.now() + 15 * 60 * 1000).toISOString();
  const DEVICE = {
    flow: "d-1",
    user_code: "ABCD-EFGH",
    verification_url: "http://127.0.0.1:8100/codex/device",
    interval: 0.01,
    expires_at: SOON,
  };
  const POLL = "POST /api/subscriptions/sign-in/d-1/poll";

  async function until(check) {
    for (let i = 0; i < 200 && !check(); i += 1) await new Promise((r) => setTimeout(r, 5));
    expect(check()).toBe(true);
  }

  function mountDevice(routes, started = DEVICE) {
    const mocked = mockFetch({ "POST /api/subscriptions/sign-in/device": json(201, started), ...routes });
    wrapper = mount(PlanSignIn, { props: { idPrefix: "t", name: "gpt", provider: "openai-codex", planType: "pro" } });
    return mocked;
  }

  const polls = (calls) => calls.filter((c) => c.url.endsWith("/poll")).length;

  it("shows the device code and its page, polls while pending and shows the plan once signed in", async () => {
    const saved = { id: 9, name: "gpt", provider: "openai-codex", token_fingerprint: "BBBB" };
    let answered = 0;
    const { calls } = mountDevice({
      [POLL]: () => (++answered < 3 ? json(202, { status: "pending" }) : json(201, saved)),
    });
    await clickNamed(wrapper, "Sign in with a device code");
    expect(calls[0].body).toEqual({ name: "gpt", plan_type: "pro" });
    expect(wrapper.find("#t-device-code").text()).toBe("ABCD-EFGH");
    const link = wrapper.find(`a[href="${DEVICE.verification_url}"]`);
    expect(link.attributes("target")).toBe("_blank");
    await until(() => wrapper.emitted("saved") !== undefined);
    expect(wrapper.emitted("saved")[0][0]).toEqual(saved);
    expect(polls(calls)).toBe(3);
    await new Promise((r) => setTimeout(r, 50));
    expect(polls(calls)).toBe(3); // done: no more polls
    expect(wrapper.find("#t-device-code").exists()).toBe(false);
  });

  it("only a ChatGPT plan offers a device code", async () => {
    mockFetch({});
    wrapper = mount(PlanSignIn, { props: { idPrefix: "t", name: "m", provider: "anthropic", planType: "pro" } });
    expect(wrapper.findAll("button").map((b) => b.text())).not.toContain("Sign in with a device code");
  });

  it("stops polling when unmounted", async () => {
    const { calls } = mountDevice({ [POLL]: json(202, { status: "pending" }) });
    await clickNamed(wrapper, "Sign in with a device code");
    await until(() => polls(calls) >= 2);
    wrapper.unmount();
    wrapper = null;
    const seen = polls(calls);
    await new Promise((r) => setTimeout(r, 60));
    expect(polls(calls)).toBeLessThanOrEqual(seen + 1); // at most the one in flight
  });

  it("stops on a sign-in the provider ended and offers the start again", async () => {
    const detail = "The provider ended this sign-in (access_denied). Start again.";
    const { calls } = mountDevice({ [POLL]: json(410, { detail, code: "sign_in_ended" }) });
    await clickNamed(wrapper, "Sign in with a device code");
    await until(() => wrapper.find("#t-sign-in-error").exists());
    expect(wrapper.find("#t-sign-in-error").text()).toBe(detail);
    expect(wrapper.findAll("button").map((b) => b.text())).toContain("Sign in with a device code");
    await new Promise((r) => setTimeout(r, 50));
    expect(polls(calls)).toBe(1);
  });

  it("stops on a provider that does not answer and checks again on request", async () => {
    let down = true;
    const saved = { id: 9, name: "gpt" };
    const { calls } = mountDevice({
      [POLL]: () => (down ? json(502, { detail: "did not answer", code: "provider_unavailable" }) : json(201, saved)),
    });
    await clickNamed(wrapper, "Sign in with a device code");
    await until(() => wrapper.find("#t-sign-in-error").exists());
    await new Promise((r) => setTimeout(r, 50));
    expect(polls(calls)).toBe(1);
    expect(wrapper.find("#t-device-code").exists()).toBe(true);
    down = false;
    await clickNamed(wrapper, "Check again");
    await until(() => wrapper.emitted("saved") !== undefined);
  });

  it("stops at the code's expiry without asking the server", async () => {
    const { calls } = mountDevice({}, { ...DEVICE, expires_at: new Date(Date.now() - 1000).toISOString() });
    await clickNamed(wrapper, "Sign in with a device code");
    await until(() => wrapper.find("#t-sign-in-error").exists());
    expect(wrapper.find("#t-sign-in-error").text()).toMatch(/expired/);
    expect(polls(calls)).toBe(0);
  });
});
