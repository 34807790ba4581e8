export const CORE_PLACEHOLDER = true;
