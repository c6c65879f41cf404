import { StoryRandom } from "./story-random.js";
import * as W from "./story-words.js";

/**
 * Generates short children's stories from a small hand-written grammar:
 * characters, places, things, and a handful of plots (a lost thing, a creature
 * in trouble, sharing, a fear, building something, a rainy picnic, hide and seek),
 * each told with several phrasings. The same seed gives the same text.
 */

interface Character {
  name: string;
  /** "a brave little fox" */
  described: string;
  he: string;
  him: string;
  his: string;
}

/** Version of the grammar: part of the built-in corpus's cache key. */
export const STORY_GRAMMAR_VERSION = 1;

/** Stories, one after another, until at least `minChars` characters. Each ends with a newline. */
export function* generateStories(seed: number, minChars: number): Generator<string> {
  const rng = new StoryRandom(seed);
  let chars = 0;
  while (chars < minChars) {
    const story = generateStory(rng);
    chars += story.length;
    yield story;
  }
}

export function generateStory(rng: StoryRandom): string {
  const hero = makeCharacter(rng);
  let friend = makeCharacter(rng);
  while (friend.name === hero.name) friend = makeCharacter(rng);
  const place = rng.pick(W.PLACES);

  const paragraphs: string[][] = [intro(rng, hero, friend, place)];
  const plots = [lostThing, creatureInTrouble, sharing, fear, buildTogether, rainyPicnic, hideAndSeek];
  const first = rng.int(plots.length);
  paragraphs.push(plots[first](rng, hero, friend, place));
  if (rng.chance(0.35)) {
    const second = (first + 1 + rng.int(plots.length - 1)) % plots.length;
    paragraphs.push([rng.pick(["Later that day,", "After that,", "The next morning,", "A little later,"]) + " " + continuing(plots[second](rng, hero, friend, place).join(" "))]);
  }
  paragraphs.push(ending(rng, hero, friend));
  return `${paragraphs.map((p) => p.join(" ")).join("\n")}\n`;
}

function makeCharacter(rng: StoryRandom): Character {
  const isGirl = rng.chance(0.5);
  const name = rng.pick(isGirl ? W.GIRL_NAMES : W.BOY_NAMES);
  const kind = rng.chance(0.4) ? (isGirl ? "girl" : "boy") : rng.pick(W.ANIMAL_KINDS);
  const [t1, t2] = rng.pickTwo(W.CHARACTER_TRAITS);
  const traits = rng.chance(0.3) && t1 !== "little" && t2 !== "little" ? `${t1}, ${t2}` : t1;
  return {
    name,
    described: withArticle(`${traits} ${kind}`),
    he: isGirl ? "she" : "he",
    him: isGirl ? "her" : "him",
    his: isGirl ? "her" : "his",
  };
}

function intro(rng: StoryRandom, hero: Character, friend: Character, place: string): string[] {
  const s: string[] = [];
  s.push(
    rng.pick([
      `Once upon a time, there was ${hero.described} named ${hero.name}.`,
      `There once was ${hero.described} called ${hero.name}.`,
      `${hero.name} was ${hero.described} who lived near ${place}.`,
      `In a little house near ${place}, there lived ${hero.described} named ${hero.name}.`,
      `Once upon a time, in a land far away, lived ${hero.described} called ${hero.name}.`,
    ]),
  );
  const pastime = rng.pick(W.PASTIMES);
  s.push(
    rng.pick([
      `${cap(hero.he)} loved to ${pastime}.`,
      `More than anything, ${hero.he} liked to ${pastime}.`,
      `Every day, ${hero.he} would ${pastime}.`,
      `${hero.name}'s favorite thing was to ${pastime}.`,
    ]),
  );
  s.push(
    rng.pick([
      `${cap(hero.his)} best friend was ${friend.described} called ${friend.name}.`,
      `${hero.name} had a friend, ${friend.described} named ${friend.name}.`,
      `${cap(hero.he)} often played with ${friend.name}, ${friend.described} who lived next door.`,
    ]),
  );
  s.push(
    rng.pick([
      `${rng.pick(W.OPENINGS_OF_TIME)}, ${hero.name} and ${friend.name} went to ${place}.`,
      `${rng.pick(W.OPENINGS_OF_TIME)}, ${hero.name} decided to visit ${place} with ${friend.name}.`,
      `${rng.pick(W.OPENINGS_OF_TIME)}, the two friends walked to ${place} together.`,
    ]),
  );
  if (rng.chance(0.5)) {
    s.push(
      rng.pick([
        "The sun was shining and the birds were singing.",
        "The air smelled of fresh flowers.",
        "Everything was calm and quiet.",
        "A soft wind was blowing through the trees.",
        "The sky was blue and there was not a single cloud.",
      ]),
    );
  }
  return s;
}

function lostThing(rng: StoryRandom, hero: Character, friend: Character): string[] {
  const thing = rng.pick(W.THINGS);
  const [spot1, spot2] = rng.pickTwo(W.HIDING_SPOTS);
  const spot3 = rng.pick(W.HIDING_SPOTS);
  return [
    `${hero.name} had ${withArticle(thing)} that ${hero.he} loved very much.`,
    `But when ${hero.he} looked for it, the ${thing} was gone!`,
    `${hero.name} looked ${spot1}. ${cap(hero.he)} looked ${spot2}. But ${hero.he} could not find it anywhere.`,
    `${hero.name} felt ${rng.pick(W.SAD_FEELINGS)} and began to cry.`,
    `"What is wrong?" asked ${friend.name}.`,
    `"I lost my ${thing}," ${rng.pick(["said", "cried", "whispered"])} ${hero.name}.`,
    rng.pick([`"Don't worry, I will help you look," said ${friend.name}.`, `"Let's look together," said ${friend.name}.`]),
    `They looked and looked, and at last ${friend.name} found the ${thing} ${spot3}.`,
    `"Here it is!" ${friend.he} shouted.`,
    `${hero.name} was so ${rng.pick(W.HAPPY_FEELINGS)}. "Thank you!" ${hero.he} said, and gave ${friend.name} a big hug.`,
  ];
}

function creatureInTrouble(rng: StoryRandom, hero: Character, friend: Character): string[] {
  const [who, trouble, help, thanks] = rng.pick(W.TROUBLES);
  const short = who.replace(/^a /, "the ");
  return [
    `Then ${hero.name} heard a small sound.`,
    `${cap(hero.he)} looked around and saw ${who}. It ${trouble}.`,
    `"Oh no!" said ${hero.name}. "We have to help!"`,
    rng.pick([
      `${hero.name} and ${friend.name} thought hard about what to do.`,
      `${friend.name} was a little scared, but ${friend.he} wanted to help too.`,
    ]),
    `Together, they ${help}.`,
    `${cap(short)} ${thanks}.`,
    `${hero.name} and ${friend.name} felt warm and ${rng.pick(W.HAPPY_FEELINGS)} inside.`,
  ];
}

function sharing(rng: StoryRandom, hero: Character, friend: Character): string[] {
  const thing = rng.pick(W.THINGS);
  return [
    `${hero.name} had ${withArticle(`new ${thing}`)}.`,
    `${friend.name} wanted to play with the ${thing} too.`,
    `"Can I have a turn?" asked ${friend.name}.`,
    `At first, ${hero.name} did not want to share. "It is mine!" ${hero.he} said.`,
    `${friend.name} felt ${rng.pick(W.SAD_FEELINGS)} and walked away.`,
    `${hero.name} played with the ${thing} alone, but it was not fun anymore.`,
    `So ${hero.name} ran after ${friend.name}. "I am sorry," ${hero.he} said. "Let's play together."`,
    rng.pick([
      `They took turns with the ${thing}, and they laughed all afternoon.`,
      `They played with the ${thing} together until the sun went down.`,
    ]),
  ];
}

function fear(rng: StoryRandom, hero: Character): string[] {
  const [what, seems, brave] = rng.pick(W.FEARS);
  const grownup = rng.pick(W.GROWNUPS);
  return [
    `${hero.name} was scared of ${what}.`,
    `That day, ${seems}, and ${hero.name} wanted to go home.`,
    `${cap(grownup)} held ${hero.his} hand and said, "Being brave does not mean you are not scared. It means you try anyway."`,
    `${hero.name} took a deep breath and counted to three.`,
    `Then ${hero.he} ${fill(brave, hero)}.`,
    rng.pick([`"I did it!" ${hero.he} said.`, `It was not so bad after all!`, `${cap(hero.he)} felt very proud of ${hero.him}self.`]),
  ];
}

function buildTogether(rng: StoryRandom, hero: Character, friend: Character): string[] {
  const [project, step, problem, fix] = rng.pick(W.PROJECTS);
  return [
    `${hero.name} and ${friend.name} wanted to make ${project}.`,
    step,
    `But then ${problem}.`,
    `${friend.name} felt ${rng.pick(W.SAD_FEELINGS)}. "Maybe we should give up," ${friend.he} said.`,
    `"No, let's try again," said ${hero.name}.`,
    `This time, they ${fix}.`,
    `When they were done, ${project.replace(/^a /, "the ")} looked wonderful.`,
    `They were very ${rng.pick(W.HAPPY_FEELINGS)}.`,
  ];
}

function rainyPicnic(rng: StoryRandom, hero: Character, friend: Character, place: string): string[] {
  const [food1, food2] = rng.pickTwo(W.FOODS);
  return [
    `${hero.name} and ${friend.name} sat down on the grass and had a picnic with ${food1} and ${food2}.`,
    `Suddenly, dark clouds covered the sky, and it began to rain.`,
    rng.pick([`They ran under a big tree and waited.`, `They ran into the old barn and waited.`, `They hid under ${hero.name}'s umbrella and waited.`]),
    `"I hope the rain stops soon," said ${friend.name}.`,
    `When the rain stopped, they saw a big rainbow over ${place}.`,
    `"It is so beautiful!" said ${hero.name}.`,
  ];
}

function hideAndSeek(rng: StoryRandom, hero: Character, friend: Character): string[] {
  const [spot1, spot2] = rng.pickTwo(W.HIDING_SPOTS);
  return [
    `${hero.name} and ${friend.name} played hide and seek.`,
    `${friend.name} hid ${spot1}, and ${hero.name} counted to ten.`,
    `${hero.name} looked ${spot2}, but ${friend.name} was not there.`,
    `Then ${hero.he} heard a little giggle.`,
    `"Found you!" ${hero.name} ${rng.pick(["laughed", "shouted", "said"])}.`,
    `Then it was ${hero.name}'s turn to hide.`,
  ];
}

function ending(rng: StoryRandom, hero: Character, friend: Character): string[] {
  const s: string[] = [];
  s.push(
    rng.pick([
      `From that day on, ${hero.name} and ${friend.name} were the best of friends.`,
      `${hero.name} learned that ${rng.pick(W.MORALS)}.`,
      `That day, ${hero.name} and ${friend.name} learned that ${rng.pick(W.MORALS)}.`,
      `That night, ${hero.name} went to bed with a big smile.`,
      `It was the best day ever.`,
    ]),
  );
  if (rng.chance(0.4)) s.push(rng.pick(["The end.", "And they lived happily ever after.", `${hero.name} would never forget that day.`]));
  return s;
}

function withArticle(phrase: string): string {
  return /^[aeiou]/i.test(phrase) ? `an ${phrase}` : `a ${phrase}`;
}

function cap(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** A plot's first sentence made to follow "Later that day, ": a leading "Then " goes. */
function continuing(s: string): string {
  return s.replace(/^Then /, "");
}

function fill(template: string, who: Character): string {
  return template.replaceAll("{he}", who.he).replaceAll("{his}", who.his).replaceAll("{him}", who.him);
}
