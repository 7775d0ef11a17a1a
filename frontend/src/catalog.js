// The billing catalog, generated from routing/billing.py into generated/tables.json
// (`manage.py panel_tables`). The server validates plan types; this only fills the
// form's choices.
import tables from "./generated/tables.json";

export const PROVIDERS = tables.providers;

export function providerLabel(id) {
  return PROVIDERS.find((p) => p.id === id)?.label ?? id;
}

export function plansFor(providerId) {
  return PROVIDERS.find((p) => p.id === providerId)?.plans ?? [];
}

export function planLabel(providerId, planType) {
  return plansFor(providerId).find((p) => p.plan_type === planType)?.label ?? planType;
}
