// The billing catalog, mirrored from routing/billing.py (a Python test keeps the
// two equal). The server validates plan types; this only fills the form's choices.
import catalog from "./plan-catalog.json";

export const PROVIDERS = catalog.providers;

export function providerLabel(id) {
  return PROVIDERS.find((p) => p.id === id)?.label ?? id;
}

export function plansFor(providerId) {
  return PROVIDERS.find((p) => p.id === providerId)?.plans ?? [];
}

export function planLabel(providerId, planType) {
  return plansFor(providerId).find((p) => p.plan_type === planType)?.label ?? planType;
}
