// The hand-written vocabulary of the built-in story corpus.

export type Gender = "he" | "she";

export const GIRL_NAMES = [
  "Lily", "Mia", "Anna", "Lucy", "Zoe", "Ella", "Rosa", "Nora", "Ivy", "Maya", "Sara", "Emma", "Lena", "Ruby", "Daisy",
  "Hana", "Amara", "Clara", "Poppy", "Tessa", "Molly", "Jade", "Kira", "Alice",
] as const;

export const BOY_NAMES = [
  "Tom", "Ben", "Sam", "Max", "Leo", "Jack", "Finn", "Omar", "Theo", "Hugo", "Noah", "Eli", "Oscar", "Ravi", "Luca",
  "Kai", "Felix", "Jonah", "Milo", "Arlo", "Toby", "Ezra", "Owen", "Rex",
] as const;

/** Kinds of character: children and animals. */
export const CHILD_KINDS = ["girl", "boy"] as const;
export const ANIMAL_KINDS = [
  "cat", "dog", "bunny", "fox", "bear", "owl", "duck", "mouse", "frog", "turtle", "puppy", "kitten", "bird", "squirrel",
  "lion", "pig", "horse", "goat", "hedgehog", "deer", "elephant", "monkey", "penguin", "raccoon", "lamb", "otter",
] as const;

export const CHARACTER_TRAITS = [
  "little", "small", "happy", "brave", "shy", "curious", "clever", "kind", "silly", "sleepy", "gentle", "quiet",
  "friendly", "tiny", "playful", "cheerful", "busy", "funny", "polite", "careful",
] as const;

/** Places, written as they follow "to" or "at". */
export const PLACES = [
  "the park", "the forest", "the beach", "the garden", "the farm", "the river", "the big hill", "the town",
  "the school", "the kitchen", "the meadow", "the lake", "the market", "the library", "the old barn",
  "the playground", "the pond", "the zoo", "the orchard", "the bakery", "the fair", "the woods", "the harbor",
] as const;

/** Things a character can have, lose, find or share: [noun phrase without article, article]. */
export const THINGS = [
  "red ball", "shiny stone", "blue kite", "little boat", "toy car", "big apple", "soft blanket", "yellow hat",
  "wooden box", "picture book", "jar of honey", "music box", "paper star", "green leaf", "toy train",
  "teddy bear", "orange scarf", "silver key", "pink balloon", "box of crayons", "old map", "tiny bell",
  "bag of marbles", "purple umbrella", "kite with a long tail", "basket of berries",
] as const;

/** What a character loves to do: verb phrases after "to". */
export const PASTIMES = [
  "play with a ball", "sing songs", "climb trees", "read books", "jump in puddles", "look at the stars",
  "bake cookies", "draw pictures", "run in the grass", "swim in the lake", "build sand castles", "pick flowers",
  "dance in the rain", "watch the clouds", "play hide and seek", "fly a kite", "count the birds", "paint rocks",
  "splash in the river", "ride a little bike", "tell funny jokes", "collect shells", "help in the garden",
] as const;

export const OPENINGS_OF_TIME = [
  "One sunny morning", "One rainy day", "One cold winter night", "On a warm summer afternoon", "Early one morning",
  "One windy autumn day", "One bright spring day", "Late one evening", "On a snowy day", "One foggy morning",
  "After lunch one day", "On the first day of summer",
] as const;

export const HIDING_SPOTS = [
  "under the bed", "behind the door", "in the toy box", "under a big leaf", "behind the tree", "in the tall grass",
  "under the table", "next to the flowers", "inside a hollow log", "on top of the shelf", "by the little bridge",
  "under a pile of leaves", "in the sand", "behind the red barn",
] as const;

/** Creatures in trouble: [who, what is wrong, how it is helped, how it says thank you]. */
export const TROUBLES = [
  ["a baby bird", "had fallen out of its nest", "gently lifted it back into its nest", "chirped a happy song"],
  ["a little kitten", "was stuck high up in a tree", "brought a ladder and helped it climb down", "purred and rubbed against their legs"],
  ["a small duck", "could not find its mother", "walked with it along the river until they found its mother", "quacked and flapped its wings"],
  ["a tiny mouse", "was caught in a tangle of string", "carefully pulled the string away", "squeaked and did a little dance"],
  ["a young deer", "had hurt its leg", "washed the leg and wrapped it in a soft cloth", "licked their hands"],
  ["a lost puppy", "was shivering in the cold", "wrapped it in a warm scarf and took it home to its family", "wagged its tail"],
  ["a baby turtle", "had turned over on its back", "slowly turned it the right way up", "blinked its little eyes"],
  ["a little bee", "was too tired to fly home", "gave it a drop of sweet water from a flower", "buzzed around their heads"],
] as const;

/** Fears: [what, how it seems that day, the brave thing done]. */
export const FEARS = [
  ["the dark", "the hallway looked very dark", "walked all the way down the dark hallway"],
  ["the big waves", "the waves looked very big", "stepped into the water and let a small wave splash over {his} toes"],
  ["loud thunder", "the thunder was very loud", "sat by the window and counted the seconds between the flashes"],
  ["the tall slide", "the slide looked very tall", "climbed up the ladder and slid all the way down"],
  ["the deep water", "the water looked very deep", "held on to the edge and kicked like a frog"],
  ["the old stairs", "the stairs creaked under every step", "climbed the stairs one step at a time"],
  ["the barking dog next door", "the dog barked very loudly", "held out a hand and let the dog sniff it"],
] as const;

/** Things to build together: [thing, its first step, what went wrong, the fix]. */
export const PROJECTS = [
  ["a sand castle", "They dug in the wet sand and made tall towers.", "a big wave came and washed one tower away", "built a wall of sand to keep the water out"],
  ["a tree house", "They found old boards and a box of nails.", "the ladder wobbled and fell over", "tied the ladder to the tree with a strong rope"],
  ["a snowman", "They rolled three big balls of snow.", "the head kept rolling off", "pressed the snow down hard and added a stick to hold it"],
  ["a paper boat", "They folded the paper very carefully.", "the boat got wet and started to sink", "made a new boat and rubbed wax on it"],
  ["a bird house", "They painted a little wooden box blue.", "the roof would not stay on", "used some glue and waited for it to dry"],
  ["a cake for Grandma", "They mixed flour, eggs and sugar in a big bowl.", "the cake came out flat", "tried again and remembered the baking powder"],
  ["a fort of pillows", "They pulled every pillow off the sofa.", "the roof fell down on their heads", "put a blanket over two chairs to hold it up"],
] as const;

export const MORALS = [
  "sharing makes everyone happy",
  "it is good to be brave, even when you feel scared",
  "friends always help each other",
  "it is okay to ask for help",
  "being kind is the most important thing",
  "if you try again, you can do hard things",
  "it is better to tell the truth",
  "small friends can do big things",
  "being patient is hard, but it is worth it",
  "everyone is good at something",
] as const;

export const HAPPY_FEELINGS = ["happy", "glad", "proud", "excited", "thankful", "cheerful"] as const;
export const SAD_FEELINGS = ["sad", "worried", "upset", "lonely", "grumpy"] as const;

export const SAY_VERBS = ["said", "asked", "called", "whispered", "shouted", "cried", "answered", "laughed"] as const;

export const GROWNUPS = ["Mom", "Dad", "Grandma", "Grandpa", "the teacher", "the old owl", "the farmer", "Aunt May"] as const;

export const FOODS = [
  "apples", "warm bread", "cookies", "sandwiches", "carrots", "berries", "soup", "pancakes", "cheese", "honey cake",
] as const;
