export { SETTING_COMMANDS, SETTING_SECTIONS, type Setting, type SettingCommand, type SettingKey, type SettingMeta, type SettingSection, defaultOf, expectationOf } from "./setting.js";
export { MODEL_SETTINGS } from "./model-settings.js";
export { DATA_SETTINGS, DEFAULT_SYNC_TIMEOUT_SECONDS, NONFINITE_POLICIES, TARGET_DEVICES, TRAINER_SETTINGS, type TargetDevice } from "./trainer-settings.js";
export {
  ALL_SETTINGS,
  KNOWN_KEYS,
  MODEL_YAML_KEYS,
  NOT_ON_PAGE,
  SETTINGS,
  configSchema,
  dataSchema,
  flagSettingsFor,
  kilnKeyFor,
  modelSchema,
  settingOf,
  trainerSchema,
  yamlKeyOf,
  type DataSection,
  type KeyedSetting,
  type KilnConfig,
  type ModelSection,
  type TrainerSection,
} from "./settings-table.js";
export { DTYPE_SPELLINGS, trainingDTypeOf } from "./dtype-spellings.js";
export { didYouMean, editDistance } from "./did-you-mean.js";
export { ignoredKeysWarning } from "./oxidizr-keys.js";
export { parseConfigText, type ParsedConfig } from "./config-text.js";
export { checkModelAgrees, modelOfSection, type InitModel } from "./model-section.js";
export { STEP_LIMIT_KEYS, applyOverrides, resolveSettings, settingSource, settingWhere, type RunSettings, type SettingOverrides } from "./run-settings.js";
export { settingsMarkdown } from "./settings-doc.js";
